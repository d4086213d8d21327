"""Recorded replies: a model that answers each request with the reply recorded for it.

A model named `recorded/<location>` is served by litellm like any other provider (the
adapter is registered in `dsstar.model.llm`): a run sends it the same requests, with the same
headers, and gets replies back. Each reply is looked up by the request's label (the
`X-DSStar-Call` header: `coder 01`, `verifier 00`, `analyzer orders.csv`, ...), never by its
prompt, so that a recording still answers when the data, and hence the prompts, changed.

`<location>` is a local path or a URL (s3://...) of
- a run's folder, runs/<run_id>: the replies it kept under replies/ (each a JSON object with
  `label` and `text`), and for each file description it took from the catalog, the replies
  that made it, kept by the run that analyzed the file (`analyzed_in_run` of its
  analysis/<key>/attempts.json). `dsstar replay` answers a run again this way;
- a folder of reply records alone, such as runs/<run_id>/replies; or
- a YAML or JSON file that maps each label to the reply's text (or to an object with `text`
  and, optionally, `reasoning`): a recording written or edited by hand, such as the one
  `dsstar demo` uses (examples/sales-replies.yaml).

A report's sub-questions are runs of their own (`<report id>-q01`, `-q02`, ...), whose labels
repeat from one to the next (each has its `planner r00`). A request of such a run is answered
from that sub-question's part of the recording, when it has one: for a run's folder, the
folder of the same sub-run beside it (`runs/<report id>-q01`); for a file, the map under the
key `q01` (a map of labels with no `text` of its own). Anything else is answered from the
recording's top level.

A recorded reply costs nothing and spends no tokens; a request with no recorded reply fails
at once (it is not retried), naming the label.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from urllib.parse import quote, unquote

import fsspec
import yaml
from fsspec.core import url_to_fs

from dsstar import keys
from dsstar.errors import ConfigError

__all__ = [
    "CALL_HEADER",
    "call_header",
    "call_label",
    "PROVIDER",
    "Recording",
    "RecordedReply",
    "recorded_location",
    "recording",
    "replies_source",
]

PROVIDER = "recorded"
# The header that names a request's label (its round and agent); every request carries it,
# percent-encoded: a label may name a file whose name is not ASCII, or not even UTF-8.
CALL_HEADER = "X-DSStar-Call"


def call_header(label: str) -> str:
    """`label` as the value of CALL_HEADER (an HTTP header holds ASCII only)."""
    return quote(label.encode("utf-8", "surrogatepass"), safe=" ()/,:;=_-.")


def call_label(header: str) -> str:
    """The label a CALL_HEADER value names."""
    return unquote(header, errors="surrogatepass")


@dataclass(frozen=True)
class RecordedReply:
    text: str
    reasoning: str = ""


def recorded_location(model: str | None) -> str | None:
    """Where the replies of `model` are recorded, or None for a model that is asked."""
    prefix, _, location = (model or "").partition("/")
    return location if prefix == PROVIDER and location else None


def replies_source(models: Iterable[str | None]) -> dict[str, str | None]:
    """What answers a run whose agents use `models`: `{"replies": "recorded", "recorded_from":
    location}` when every one of them is a recording (a mix names the first recording and
    says "mixed"), else `{"replies": "model", "recorded_from": None}`. Kept in run.json and
    shown by the CLI and in the Prefect UI, so a recorded run never passes for a model's."""
    locations = [recorded_location(m) for m in models]
    recorded = [place for place in locations if place]
    if not recorded:
        return {"replies": "model", "recorded_from": None}
    kind = "recorded" if len(recorded) == len(locations) else "mixed"
    return {"replies": kind, "recorded_from": recorded[0]}


# The run id of a report's sub-question: the report's id, then -q and its number.
_SUB_RUN = re.compile(r"-(q\d{2,3})$")


class Recording:
    """The replies recorded at one location, read once, looked up by label (and, for a
    report's sub-run, by its part of the recording)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._replies: dict[str, RecordedReply] | None = None
        self._sections: dict[str, dict[str, RecordedReply]] = {}
        self._lock = threading.Lock()  # analyses ask from several threads at once

    def reply(self, label: str, run: str = "") -> RecordedReply:
        """The reply recorded for `label` (asked by run `run`); LookupError, naming it, when
        there is none."""
        with self._lock:
            if self._replies is None:
                self._replies, self._sections = _read(self.location)
            section = _SUB_RUN.search(run or "")
            part = self._section(section.group(1)) if section else {}
            replies = self._replies
        found = part.get(label) or replies.get(label)  # a sub-run's own first
        if found is None:
            raise LookupError(
                f"no reply is recorded for {label!r} in {self.location}"
                f" ({len(part) + len(replies)} recorded)"
            )
        return found

    def _section(self, name: str) -> dict[str, RecordedReply]:
        """The replies of sub-run `name` (q01...), {} when the recording has none."""
        if name not in self._sections:  # a run's folder: its sub-run's folder, beside it
            self._sections[name] = _sub_run(self.location, name)
        return self._sections[name]


@cache
def recording(location: str) -> Recording:
    """The recording at `location`, shared by every request of this process."""
    return Recording(location)


Sections = dict[str, dict[str, RecordedReply]]


def _read(location: str) -> tuple[dict[str, RecordedReply], Sections]:
    """The replies at `location` by label, and a file's sub-run parts by name (q01...)."""
    try:
        fs, root = url_to_fs(location)
        root = root.rstrip("/")
        if fs.isdir(f"{root}/{keys.REPLIES}"):
            return _from_run(fs, root), {}
        if fs.isdir(root):
            return _from_folder(fs, root), {}
        text = fs.cat_file(root).decode("utf-8", errors="replace")
    except FileNotFoundError as exc:
        raise ConfigError(f"no recorded replies at {location}") from exc
    except (OSError, ValueError, ImportError) as exc:
        raise ConfigError(f"cannot read the recorded replies at {location}: {exc}") from exc
    try:
        loaded = yaml.safe_load(text) if not root.endswith(".json") else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{location} is not a YAML or JSON map of replies: {exc}") from exc
    if not isinstance(loaded, dict):
        raise ConfigError(f"{location} is not a map of labels to replies")
    sections = {
        str(name): {str(label): _reply(value) for label, value in part.items()}
        for name, part in loaded.items()
        if _SUB_RUN.fullmatch(f"-{name}") and isinstance(part, dict) and "text" not in part
    }
    replies = {str(k): _reply(v) for k, v in loaded.items() if str(k) not in sections}
    return replies, sections


def _sub_run(location: str, name: str) -> dict[str, RecordedReply]:
    """The replies of sub-run `name` of the run recorded at `location` ({} for none)."""
    try:
        fs, root = url_to_fs(location)
        root = root.rstrip("/")
        if fs.isdir(f"{root}/{keys.REPLIES}") and fs.isdir(f"{root}-{name}/{keys.REPLIES}"):
            return _from_run(fs, f"{root}-{name}")
    except (OSError, ValueError):
        pass
    return {}


def _from_run(fs: fsspec.AbstractFileSystem, root: str) -> dict[str, RecordedReply]:
    """A run's own replies, and those that made the file descriptions it reused."""
    replies = _from_folder(fs, f"{root}/{keys.REPLIES}")
    runs, run_id = root.rsplit("/", 1)
    for found in fs.glob(f"{root}/{keys.analysis_glob('attempts.json')}"):
        try:
            kept = json.loads(fs.cat_file(found))
        except (OSError, json.JSONDecodeError):
            continue
        origin, path = kept.get("analyzed_in_run"), kept.get("path")
        if not origin or not path or origin == run_id or "/" in origin:
            continue
        about = re.compile(rf"(analyzer|(debugger|summarizer) analysis) {re.escape(path)}( #\d+)?")
        # the folder of run `origin`, beside this one
        for label, reply in _from_folder(fs, f"{runs}/{origin}/{keys.REPLIES}").items():
            if about.fullmatch(label):
                replies.setdefault(label, reply)
    return replies


def _from_folder(fs: fsspec.AbstractFileSystem, root: str) -> dict[str, RecordedReply]:
    """A run's replies/ folder: one JSON record per reply it received. A label asked twice
    (a resumed run that asked it again of another model) keeps the reply stored last."""
    found: list[tuple[str, str, RecordedReply]] = []
    for path in fs.glob(f"{root.rstrip('/')}/*.json"):
        try:
            kept = json.loads(fs.cat_file(path))
        except (OSError, json.JSONDecodeError):
            continue  # a record cut short by a crash was never used either
        if isinstance(kept, dict) and "label" in kept and "text" in kept:
            found.append((_stamp(fs.info(path)), str(kept["label"]), _reply(kept)))
    return {label: reply for _when, label, reply in sorted(found, key=lambda f: f[0])}


def _stamp(info: dict) -> float:
    """When an object was written: a local file's mtime, an S3 object's LastModified."""
    when = info.get("mtime") or info.get("LastModified") or info.get("created") or 0
    return when.timestamp() if hasattr(when, "timestamp") else float(when)


def _reply(value: object) -> RecordedReply:
    if isinstance(value, dict):
        return RecordedReply(str(value.get("text") or ""), str(value.get("reasoning") or ""))
    return RecordedReply("" if value is None else str(value))
