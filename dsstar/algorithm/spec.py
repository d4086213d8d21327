"""The one contract of a run: `RunSpec`, what every agent call and execution of it needs,
typed (models, the sandbox's `Limits`, the loop's `Budget`, the spending `Ceiling`, bounds of
concurrency and retries, whether a person is asked). It is built from the settings where a
run is prepared (`dsstar.inputs.spec.run_spec`); tasks take it as their parameter and read
nothing else from the environment, except the API key, which is never a (recorded)
parameter. A run's run.json keeps it (`spec`), where the report reads its bounds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dsstar.algorithm.context import Retrieval
from dsstar.algorithm.runtime import Budget
from dsstar.data.retrieval import Embedding
from dsstar.execution.sandbox import Limits
from dsstar.model.ceiling import Ceiling
from dsstar.settings import default

__all__ = ["RunSpec"]


@dataclass(frozen=True)
class RunSpec:
    """The one contract of a run: what every agent call and execution of it needs, typed.
    Built once (`dsstar.inputs.spec.run_spec`), where the run's settings were validated;
    everything below takes it and nothing else. JSON-safe (`to_dict`, `from_dict`), without
    secrets: the API key and the database URL are never among its fields."""

    run_id: str
    storage: str
    data_dir: str
    llm: dict[str, dict[str, Any]]  # agent -> LLMConfig fields
    limits: Limits  # of one generated script
    budget: Budget  # the loop's bounds
    ceiling: Ceiling  # the most the run may spend (falsy: no bound)
    retrieval: Retrieval  # which files the agents see, and how much of each
    embedding: Embedding | None  # fused with BM25 when ranking files; None: BM25 alone
    reuse: bool  # try the last verified solution of the same question first
    sandbox: str
    work_dir: str | None
    llm_retries: int
    llm_retry_delay: float
    max_parallel: int
    llm_concurrency: int
    llm_rpm: int | None
    slot_wait: float
    script_python: str | None = None  # the worker's DSSTAR_SCRIPT_PYTHON (None: its own)
    libraries: list[str] = field(default_factory=list)  # what the prompts name
    # After a round the verifier finds not sufficient, a person is asked (for so many seconds).
    ask_human: bool = default("ask_human")
    human_timeout: float = default("human_timeout")

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-safe values (a task's parameter): `from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunSpec:
        """The spec that `to_dict` wrote."""
        return cls(**{
            name: _PARTS[name](**value) if name in _PARTS and value is not None else value
            for name, value in values.items()
        })  # fmt: skip

    def without_outputs(self) -> RunSpec:
        """The same spec for scripts whose files are not kept (file analysis)."""
        return replace(self, limits=replace(self.limits, outputs=0))

    @property
    def retry_delays(self) -> list[float]:
        """Seconds before each retry of an LLM call: doubling from `llm_retry_delay`."""
        return [self.llm_retry_delay * 2**i for i in range(self.llm_retries)]


# The spec's typed parts, by field: what `RunSpec.from_dict` builds again from their dicts.
_PARTS: dict[str, Any] = {
    "limits": Limits,
    "budget": Budget,
    "ceiling": Ceiling,
    "retrieval": Retrieval,
    "embedding": Embedding,
}
