"""The LLM judge for KramaBench's approximate strings: does an answer paraphrase the truth?

Like an agent: `render` builds the request from `prompts/judge.j2`, `parse` reads the verdict.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from dsstar.algorithm.agents import render as _render
from dsstar.errors import LLMError
from dsstar.inputs.spec import config_for
from dsstar.model.llm import Message, complete
from dsstar.settings import Settings

__all__ = ["LLMJudge", "parse", "render"]

_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def render(answer: str, truth: str) -> list[Message]:
    """The judge's request: the reference answer, the answer to grade, Yes or No."""
    return _render("judge", answer=answer, truth=truth)


def parse(text: str) -> bool | None:
    """True for Yes, False for No (the first one named), None when neither is named."""
    match = _VERDICT.search(text or "")
    return None if not match else match.group(1).lower() == "yes"


class LLMJudge:
    """Asks the verifier's model (header `X-DSStar-Agent: judge`); one call per pair. Verdicts
    are kept in `cache_file` (when given), so scoring again asks nothing twice. Returns None (no
    verdict: the caller falls back) when the model fails or names neither Yes nor No."""

    def __init__(
        self, settings: Settings, run_id: str = "bench-judge", cache_file: Path | None = None
    ) -> None:
        self.config = config_for(settings, "verifier")
        self.api_key = settings.api_key.get_secret_value() if settings.api_key else None
        self.run_id = run_id
        self.cache_file = cache_file
        self.calls: list[dict] = []
        self._seen: dict[tuple[str, str], bool | None] = {}
        if cache_file and cache_file.is_file():
            for item in json.loads(cache_file.read_text(encoding="utf-8")):
                self._seen[(item["answer"], item["truth"])] = item["same"]

    def save(self) -> None:
        """Write the verdicts obtained so far to `cache_file`."""
        if self.cache_file:
            known = [
                {"answer": a, "truth": t, "same": v}
                for (a, t), v in self._seen.items()
                if v is not None
            ]
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            self.cache_file.write_text(json.dumps(known, indent=1, ensure_ascii=False) + "\n")

    def __call__(self, answer: str, truth: str) -> bool | None:
        key = (answer, truth)
        if key not in self._seen:
            try:
                reply = complete(
                    self.config,
                    render(answer, truth),
                    agent="judge",
                    run_id=self.run_id,
                    api_key=self.api_key,
                )
            except LLMError:
                return None  # the fallback scores it, flagged as such; not remembered
            self.calls.append(reply.to_dict() | {"agent": "judge", "label": "judge"})
            self._seen[key] = parse(reply.text)
        return self._seen[key]
