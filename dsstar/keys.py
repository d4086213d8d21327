"""Storage keys: the name of every object dsstar keeps under a storage URL, one function per
kind of object, and `LAYOUT`, the table of them that the docs render. Nothing else spells a
key, so the layout is changed here or nowhere (a test finds keys spelled elsewhere, and
checks that `LAYOUT` covers every key these functions make).

A run's objects are named relative to its folder (`round_object(3, "code.py")` is
`rounds/03/code.py`): that is how a run records them (records/record.py) and how run.json
points at them; `in_run(run_id, key)` puts such a key under `runs/<run_id>/`.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "CACHE",
    "CACHE_PRUNED",
    "FINAL",
    "LAYOUT",
    "REPLIES",
    "ROUNDS",
    "RUNS",
    "RUN_RECORD",
    "analysis_glob",
    "analysis_key",
    "analysis_object",
    "cache_entry",
    "catalog_analysis",
    "catalog_profile",
    "catalog_root",
    "chart",
    "claim",
    "claims_folder",
    "contract",
    "contracts_docs",
    "contracts_folder",
    "critique",
    "draft",
    "figure",
    "figures_folder",
    "files_folder",
    "final_object",
    "in_run",
    "output",
    "passed_contract",
    "reply",
    "replies_folder",
    "report_object",
    "reuse_object",
    "root_key",
    "round_folder",
    "round_key",
    "round_object",
    "run_file",
    "run_folder",
    "run_record",
]

# Every kind of object under a storage URL: (key pattern, what it holds). A <name> stands for
# one path segment and a trailing ... for any keys below; <key> is `analysis_key(path)`, <NN>
# `round_key(n)`, <config> a digest of what the entry depends on, <root> `root_key(location)`.
LAYOUT: tuple[tuple[str, str], ...] = (
    (
        "runs/<run_id>/run.json",
        "parameters, the run's spec (models, bounds), status, answer, totals, host, pid and"
        " heartbeat",
    ),
    ("runs/<run_id>/claims/<NNNNNN>.json", "who holds the run id: one per attempt (run, resume)"),
    ("runs/<run_id>/analysis/<key>/script.py", "the analyzer's script for one file"),
    ("runs/<run_id>/analysis/<key>/output.txt", "the file's description, as the agents saw it"),
    ("runs/<run_id>/analysis/<key>/attempts.json", "the file's path, format, hash and attempts"),
    ("runs/<run_id>/reuse/code.py", "a stored solution tried first and rejected"),
    ("runs/<run_id>/reuse/output.txt", "its output"),
    ("runs/<run_id>/reuse/verdict.json", "the verifier's decision on it"),
    ("runs/<run_id>/rounds/<NN>/plan.json", "the plan executed in round NN (step texts)"),
    ("runs/<run_id>/rounds/<NN>/code.py", "the script of round NN"),
    ("runs/<run_id>/rounds/<NN>/output.txt", "its stdout and stderr"),
    ("runs/<run_id>/rounds/<NN>/verdict.json", "the verifier's decision and debug attempts"),
    ("runs/<run_id>/rounds/<NN>/route.json", "the router's decision that opened round NN"),
    ("runs/<run_id>/rounds/<NN>/guidance.json", "a person's answer after round NN (ask_human)"),
    ("runs/<run_id>/rounds/<NN>/figures/<name>", "figure files round NN's script saved"),
    ("runs/<run_id>/final/solution.py", "the script that states the answer"),
    ("runs/<run_id>/final/output.txt", "its whole stdout and stderr (a failure's traceback)"),
    ("runs/<run_id>/final/answer.json", "the answer, the status and the plan"),
    ("runs/<run_id>/final/notebook.ipynb", "every round as notebook cells, then the solution"),
    ("runs/<run_id>/final/outputs/...", "every file the final script wrote: the deliverables"),
    ("runs/<run_id>/final/charts/...", "name.json: the description of each chart among them"),
    ("runs/<run_id>/final/report.md", "a report: its text, citing its sub-questions' answers"),
    ("runs/<run_id>/final/report.html", "the same report as one page, its charts inline"),
    ("runs/<run_id>/report/sub_questions.json", "a report's sub-questions, their runs and answers"),
    ("runs/<run_id>/report/draft-<NN>.md", "the writer's draft of refinement pass NN (00: first)"),
    ("runs/<run_id>/report/critique-<NN>.json", "the critic's review that opened pass NN"),
    ("runs/<run_id>/replies/<label>-<hash>.json", "every model reply, kept as it arrives"),
    (
        "runs/<run_id>/files/<sha256>",
        "a figure or deliverable a script wrote, stored once by content while the run goes on;"
        " its cached execution points here (gone when the run ends with an answer)",
    ),
    ("contracts/<root>/<key>.json", "a file's data contract (Great Expectations suite)"),
    ("contracts/<root>/passed/<key>.json", "the statistics of its last passed validation"),
    ("contracts-docs/<root>/...", "Data Docs and summary.html of `contracts validate`"),
    ("catalog/roots/<digest>.json", "per data root: path, size, mtime, format, sha256"),
    ("catalog/profiles/<sha256>/<config>.txt", "offline profiles, by content, path and profiler"),
    ("catalog/analyses/<sha256>/<config>.json", "analyzer descriptions, by content and prompt"),
    ("cache/...", "Prefect's persisted task results (replies, executions, analyses)"),
    ("cache/.pruned.json", "when old results were last pruned (DSSTAR_CACHE_MAX_AGE_DAYS)"),
)

RUNS = "runs"  # the folder of every run, one folder per run id
CACHE = "cache"  # Prefect's persisted task results (tasks/_common.py)
CACHE_PRUNED = f"{CACHE}/.pruned.json"  # when cache/ was last pruned (records/prune.py)
# Within a run's folder:
RUN_RECORD = "run.json"
REPLIES = "replies"
ROUNDS = "rounds"
FINAL = "final"  # the final script's folder; run.json's figure entries name it so

# -- segments of keys ----------------------------------------------------------------------


def round_key(number: int) -> str:
    """The folder name of round `number`: 00, 01, ..."""
    return f"{number:02d}"


_PLAIN_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def analysis_key(path: str) -> str:
    """The folder of a file's analysis: bounded (at most 117 characters) and collision-free.

    A short plain name (letters, digits, '.', '_', '-') is its own key. Any other path, for
    example `x/y.csv` or a 300-character one, becomes a readable prefix, '~' and a hash of
    the whole path; plain keys never contain '~', so the two kinds cannot meet, and
    `x/y.csv` and `x__y.csv` get different keys. The original path is kept in the record."""
    if _PLAIN_KEY.fullmatch(path) and ".." not in path:
        return path
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", path.replace("/", "__")).strip("._")[:100]
    # surrogatepass: a file name that is not valid UTF-8 (surrogate-escaped) still hashes
    digest = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{readable or 'file'}~{digest}"


def root_key(location: str) -> str:
    """A bounded, collision-free folder name for a data root: readable tail + hash."""
    tail = re.sub(r"[^A-Za-z0-9_.-]+", "_", location.rstrip("/").rsplit("/", 1)[-1])[:40]
    digest = hashlib.sha256(location.encode("utf-8")).hexdigest()[:12]
    return f"{tail or 'root'}-{digest}"


# -- a run's folder --------------------------------------------------------------------------


def run_folder(run_id: str) -> str:
    """runs/<run_id>: everything one run stores."""
    return f"{RUNS}/{run_id}"


def in_run(run_id: str, key: str) -> str:
    """A key relative to a run's folder (as the functions below make them), in storage."""
    return f"{run_folder(run_id)}/{key}"


def run_record(run_id: str) -> str:
    """runs/<run_id>/run.json."""
    return in_run(run_id, RUN_RECORD)


def claims_folder(run_id: str) -> str:
    return in_run(run_id, "claims")


def claim(run_id: str, number: int) -> str:
    """The claim of the `number`th attempt under a run id (records/claim.py)."""
    return f"{claims_folder(run_id)}/{number:06d}.json"


def files_folder(run_id: str) -> str:
    """runs/<run_id>/files: the files a run's scripts wrote, stored once by content."""
    return in_run(run_id, "files")


def run_file(run_id: str, sha256: str) -> str:
    """A file a script of the run wrote, by its content's SHA-256 (records/files.py)."""
    return f"{files_folder(run_id)}/{sha256}"


def replies_folder(run_id: str) -> str:
    return in_run(run_id, REPLIES)


def reply(run_id: str, label: str, request: str) -> str:
    """A kept model reply: its call label made a safe name (at most 60 characters) and the
    hash of the request."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in label)[:60]
    return f"{replies_folder(run_id)}/{safe}-{request}.json"


# -- within a run's folder (keys relative to it) ------------------------------------------


def analysis_object(path: str, name: str) -> str:
    """analysis/<key>/<name>: script.py, output.txt or attempts.json of data file `path`."""
    return f"analysis/{analysis_key(path)}/{name}"


def analysis_glob(name: str) -> str:
    """The glob of object `name` of every analyzed file."""
    return f"analysis/*/{name}"


def reuse_object(name: str) -> str:
    """reuse/<name>: code.py, output.txt, verdict.json of a reused solution."""
    return f"reuse/{name}"


def round_folder(number: int) -> str:
    """rounds/<NN>: how run.json's figure entries name a round too."""
    return f"{ROUNDS}/{round_key(number)}"


def round_object(number: int, name: str) -> str:
    """rounds/<NN>/<name>: plan.json, code.py, output.txt, verdict.json, route.json..."""
    return f"{round_folder(number)}/{name}"


def figures_folder(folder: str) -> str:
    """Where the figures of the script of `folder` (a round's) are kept."""
    return f"{folder}/figures"


def figure(folder: str, name: str) -> str:
    return f"{figures_folder(folder)}/{name}"


def final_object(name: str) -> str:
    """final/<name>: solution.py, output.txt, answer.json, notebook.ipynb."""
    return f"{FINAL}/{name}"


def output(name: str) -> str:
    """final/outputs/<name>: a file the final script wrote (`name` relative to its folder)."""
    return final_object(f"outputs/{name}")


def chart(name: str) -> str:
    """final/charts/<name>.json: the description of output `name`, a chart."""
    return final_object(f"charts/{name}.json")


def report_object(name: str) -> str:
    """report/<name>: a report's own objects (its sub-questions, drafts and critiques)."""
    return f"report/{name}"


def draft(number: int) -> str:
    """report/draft-<NN>.md: the writer's draft of refinement pass `number`."""
    return report_object(f"draft-{round_key(number)}.md")


def critique(number: int) -> str:
    """report/critique-<NN>.json: the critic's review that opened pass `number`."""
    return report_object(f"critique-{round_key(number)}.json")


def cache_entry(name: str) -> str:
    """cache/<name>: one of Prefect's persisted task results (named by its cache key)."""
    return f"{CACHE}/{name}"


# -- the data side -------------------------------------------------------------------------


def contracts_folder(location: str) -> str:
    """The contracts of the data root at `location`."""
    return f"contracts/{root_key(location)}"


def contract(location: str, path: str) -> str:
    """The contract of file `path` (relative) under the data root at `location`."""
    return f"{contracts_folder(location)}/{analysis_key(path)}.json"


def passed_contract(location: str, path: str) -> str:
    """The statistics of the last passed validation of that file."""
    return f"{contracts_folder(location)}/passed/{analysis_key(path)}.json"


def contracts_docs(location: str, name: str) -> str:
    """What `contracts validate --data-docs` writes for the data root at `location`:
    `gx` (the folder of Great Expectations' Data Docs) or `summary.html`."""
    return f"contracts-docs/{root_key(location)}/{name}"


def catalog_root(digest: str) -> str:
    """The index of one data root (`digest` of its location)."""
    return f"catalog/roots/{digest}.json"


def catalog_profile(sha256: str, config: str) -> str:
    """The offline profile of content `sha256` under `config` (path, profiler version)."""
    return f"catalog/profiles/{sha256}/{config}.txt"


def catalog_analysis(sha256: str, config: str) -> str:
    """The analyzer record of content `sha256` under `config` (path, prompt, models...)."""
    return f"catalog/analyses/{sha256}/{config}.json"
