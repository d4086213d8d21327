"""What describing a lake would cost, before any model call (`dsstar describe --estimate`).

The files are listed and grouped by shape exactly as the analysis does (offline profiles,
from the catalog or made in the sandbox), so the calls counted are the analyzer calls the
describe would make: one per shape with no description yet, and none for files the catalog
knows; a file whose profile failed is a group of its own, counted, and listed. Input tokens
are the analyzer's prompts counted with the model's tokenizer; a reply is assumed to be
`REPLY_TOKENS` long. Debugger calls, made only when a script fails, are not counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dsstar.algorithm import agents
from dsstar.algorithm.analysis import analysis_plan, known_analyses
from dsstar.algorithm.spec import RunSpec
from dsstar.data.sources import DataSource
from dsstar.model.llm import count_tokens
from dsstar.model.pricing import price

__all__ = ["REPLY_TOKENS", "Estimate", "estimate_describe"]

REPLY_TOKENS = 400  # an analyzer reply: a short script, with a sentence or two around it


@dataclass(frozen=True)
class Estimate:
    """A describe's cost before it is paid: `cost_usd` is None when no price is known."""

    files: int
    groups: int
    described: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    model: str
    # Files whose offline profile failed ({"path", "reason"}): each is counted as a call.
    unprofiled: list[dict[str, str]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_describe(spec: RunSpec, source: DataSource) -> Estimate:
    """Estimate `dsstar describe` of `source` under `spec` (see the module's docstring)."""
    files, found, missing = known_analyses(spec, source)
    plan = analysis_plan(spec, source, files, found, missing, every_shape=True)
    model = spec.llm["analyzer"]["model"]
    tokens = sum(
        _prompt_tokens(model, f.sandbox_path, f.format, spec.libraries) for f in plan.analyze
    )
    replies = REPLY_TOKENS * len(plan.analyze)
    return Estimate(
        files=len(files),
        groups=plan.groups,
        described=len(found),
        calls=len(plan.analyze),
        input_tokens=tokens,
        output_tokens=replies,
        cost_usd=_rounded(price(model, tokens, replies)),
        model=model,
        unprofiled=[{"path": p, "reason": r} for p, r in plan.unprofiled.items()],
    )


def _rounded(usd: float | None) -> float | None:
    return None if usd is None else round(usd, 8)  # no float noise in the JSON


def _prompt_tokens(model: str, path: str, file_format: str, libraries: list[str]) -> int:
    messages = agents.analyzer.render(path=path, format=file_format, libraries=libraries)
    return sum(count_tokens(model, str(m.get("content") or "")) for m in messages)
