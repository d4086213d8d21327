"""The one place where settings become what a run's parts need: the `RunSpec` every task gets
(models, the sandbox's `Limits`, the loop's `Budget`, the spending `Ceiling`, bounds of
concurrency and retries, whether a person is asked), the model of each agent, and the bounds
of the offline profiler. Built once per run, in the process that validated the settings
(this floor, where a run is prepared); everything below takes these typed values and never
reads `Settings` (the contract "Below the inputs floor, the settings give defaults only" in
pyproject). The data a run reads is opened here too (`data_source`): before its spec, whose
data folder is that opening's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import TypeVar

from dsstar.algorithm.agents import ROSTER
from dsstar.algorithm.context import Retrieval
from dsstar.algorithm.runtime import Budget
from dsstar.algorithm.spec import RunSpec
from dsstar.data.lake import ArchiveLimits
from dsstar.data.profiler import ProfileLimits
from dsstar.data.retrieval import Embedding
from dsstar.data.sources import DataRoot, DataSource, open_data
from dsstar.errors import ConfigError
from dsstar.execution.sandbox import Limits
from dsstar.execution.sandbox.interpreter import interpreter, resolve_python
from dsstar.model.ceiling import Ceiling
from dsstar.model.config import NO_MODEL_HELP, LLMConfig
from dsstar.settings import Settings
from dsstar.storage import Store

__all__ = [
    "archive_limits",
    "config_for",
    "data_source",
    "embedding",
    "opened",
    "profile_limits",
    "require_model",
    "run_spec",
    "sandbox_limits",
    "spend_ceiling",
]


def run_spec(settings: Settings, run_id: str, storage: str, data_dir: Path | str) -> RunSpec:
    """The spec of run `run_id` over the data opened at `data_dir`, with `settings`."""
    return RunSpec(
        run_id=run_id,
        storage=storage,
        data_dir=str(data_dir),
        llm={agent: vars(config_for(settings, agent)) for agent in ROSTER},
        limits=sandbox_limits(settings),
        budget=_named_as_settings(Budget, settings),
        ceiling=spend_ceiling(settings),
        retrieval=_named_as_settings(Retrieval, settings),
        embedding=embedding(settings),
        reuse=settings.reuse,
        ask_human=settings.ask_human,
        human_timeout=settings.human_timeout,
        sandbox=settings.sandbox,
        work_dir=str(settings.work_dir) if settings.work_dir else None,
        llm_retries=settings.llm_retries,
        llm_retry_delay=settings.llm_retry_delay,
        max_parallel=settings.max_parallel,
        llm_concurrency=settings.llm_concurrency,
        llm_rpm=settings.llm_rpm,
        slot_wait=settings.slot_wait,
        script_python=_script_python(settings),
        # What the prompts name: the scripts' interpreter's libraries, probed once per process.
        libraries=list(interpreter(settings.script_python).libraries),
    )


@contextmanager
def opened(data: str, settings: Settings, run_id: str) -> Iterator[tuple[DataSource, RunSpec]]:
    """`data` opened read-only and the spec of a run `run_id` over it (a describe, or its
    estimate, that reads the catalog without a flow); the view is closed on leaving."""
    source = data_source(data, settings)
    try:
        yield source, run_spec(settings, run_id, Store(settings.storage).url, source.mount_dir)
    finally:
        source.close()


def data_source(data: str | DataRoot, settings: Settings, tag: str = "data") -> DataSource:
    """`data` opened as `settings` say (`dsstar.data.sources.open_data`): its archives'
    bounds, the folder its view is made in; released with `scratch.release(tag)`."""
    return open_data(data, archive_limits(settings), settings.work_dir, tag)


def archive_limits(settings: Settings) -> ArchiveLimits:
    """How far an archive of the data may expand (the settings' `archive_*` bounds)."""
    return ArchiveLimits(
        max_bytes=settings.archive_max_bytes,
        max_members=settings.archive_max_members,
        max_depth=settings.archive_max_depth,
    )


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


def spend_ceiling(settings: Settings) -> Ceiling:
    """The most a run may spend on model calls (falsy: no bound); a nightly batch's too."""
    return _named_as_settings(Ceiling, settings)


def require_model(settings: Settings) -> None:
    """Fail with instructions when no model is configured for some agent."""
    if not settings.model and not settings.agent_models:
        raise ConfigError(NO_MODEL_HELP)


def config_for(settings: Settings, agent: str) -> LLMConfig:
    """The model configuration of one agent."""
    model = settings.model_for(agent)
    if not model:
        raise ConfigError(f"No model for the {agent} agent.\n\n{NO_MODEL_HELP}")
    return LLMConfig(
        model=model,
        api_base=settings.api_base,
        temperature=settings.temperature,
        timeout=settings.llm_timeout,
    )


def embedding(settings: Settings) -> Embedding | None:
    """The embedding model that the settings embedding_* ask for; None: BM25 alone."""
    if not settings.embedding_model:
        return None
    folder = settings.embedding_cache_dir
    return Embedding(
        model=settings.embedding_model,
        api_base=settings.embedding_api_base,
        timeout=settings.llm_timeout,
        cache_dir=str(folder) if folder else None,
        input_type=settings.embedding_input_type,
    )


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
