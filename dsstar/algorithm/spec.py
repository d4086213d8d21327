"""The one place where settings become what a run's parts need: the `RunSpec` every task gets
(models, the sandbox's `Limits`, the loop's `Budget`, the spending `Ceiling`, bounds of
concurrency and retries), and the bounds of the offline profiler. Built once per run, in the
process that validated the settings; tasks take it as their parameter and read nothing else
from the environment, except the API key, which is never a (recorded) parameter. The bounds
of archives are the data side's own (`dsstar.data.sources.archive_limits`): it opens data
before any run spec exists."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from dsstar.algorithm.agents import ROSTER
from dsstar.algorithm.context import Retrieval
from dsstar.algorithm.runtime import Budget
from dsstar.data.profiler import ProfileLimits
from dsstar.data.retrieval import Embedding
from dsstar.execution.sandbox import Limits
from dsstar.execution.sandbox.interpreter import interpreter, resolve_python
from dsstar.model.ceiling import Ceiling
from dsstar.model.config import config_for
from dsstar.settings import Settings

__all__ = [
    "RunSpec",
    "loop_budget",
    "profile_limits",
    "sandbox_limits",
    "script_libraries",
    "spend_ceiling",
]


def sandbox_limits(settings: Settings) -> Limits:
    """The bounds of one generated script."""
    return Limits(
        timeout_s=settings.exec_timeout,
        memory_mb=settings.exec_memory_mb,
        output_bytes=settings.exec_output_bytes,
        processes=settings.exec_processes,
        disk_mb=settings.exec_disk_mb,
        outputs=settings.exec_outputs,
        outputs_mb=settings.exec_outputs_mb,
        cpu_s=settings.exec_cpu_seconds,
        warm=settings.exec_pool,
    )


_P = TypeVar("_P")


def _named_as_settings(part: type[_P], settings: Settings) -> _P:
    """A typed part of the spec whose fields are named as the settings that choose them:
    each field filled from its setting, so a new one is a field there and nothing here."""
    return part(**{f.name: getattr(settings, f.name) for f in fields(part)})  # type: ignore[arg-type]


def loop_budget(settings: Settings) -> Budget:
    """The loop's bounds."""
    return _named_as_settings(Budget, settings)


def spend_ceiling(settings: Settings) -> Ceiling:
    """The most a run may spend on model calls (falsy: no bound); a nightly batch's too."""
    return _named_as_settings(Ceiling, settings)


def script_libraries(settings: Settings) -> list[str]:
    """The libraries the prompts name: those of the interpreter scripts run in (the worker's
    DSSTAR_SCRIPT_PYTHON, else dsstar's own), probed once per process."""
    return list(interpreter(settings.script_python).libraries)


def _script_python(settings: Settings) -> str | None:
    return resolve_python(settings.script_python) if settings.script_python else None


def profile_limits(settings: Settings) -> ProfileLimits:
    """The offline profiler's bounds."""
    return ProfileLimits(
        file_timeout_s=settings.profile_timeout,
        file_max_bytes=settings.profile_max_bytes,
        max_chars=settings.max_description_chars,
        memory_mb=settings.exec_memory_mb,
    )


@dataclass(frozen=True)
class RunSpec:
    """The one contract of a run: what every agent call and execution of it needs, typed.
    Built once (`from_settings`), where the run's settings were validated; everything below
    takes it and nothing else. JSON-safe (`to_dict`, `from_dict`), without secrets."""

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

    @classmethod
    def from_settings(
        cls, settings: Settings, run_id: str, storage: str, data_dir: Path
    ) -> RunSpec:
        return cls(
            run_id=run_id,
            storage=storage,
            data_dir=str(data_dir),
            llm={agent: vars(config_for(settings, agent)) for agent in ROSTER},
            limits=sandbox_limits(settings),
            budget=loop_budget(settings),
            ceiling=spend_ceiling(settings),
            retrieval=_named_as_settings(Retrieval, settings),
            embedding=Embedding.of(settings),
            reuse=settings.reuse,
            sandbox=settings.sandbox,
            work_dir=str(settings.work_dir) if settings.work_dir else None,
            llm_retries=settings.llm_retries,
            llm_retry_delay=settings.llm_retry_delay,
            max_parallel=settings.max_parallel,
            llm_concurrency=settings.llm_concurrency,
            llm_rpm=settings.llm_rpm,
            slot_wait=settings.slot_wait,
            script_python=_script_python(settings),
            libraries=script_libraries(settings),
        )

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
