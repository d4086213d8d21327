"""Every error dsstar raises, in one tree.

    DSStarError                  base of everything below
    ├── UsageError               bad flags, settings or input (CLI exit code 2)
    │   ├── ConfigError          a setting is missing or invalid (no model configured, ...)
    │   ├── DataError            the data location is missing, empty or unreadable
    │   ├── ForbiddenError       the worker does not let a run form choose this (trust.py)
    │   └── RunIdInUse           another run holds this run id, or it has finished
    ├── LLMError                 a model call failed
    │   ├── LLMTransientError    worth retrying: rate limits, timeouts, connection errors, 5xx
    │   └── LLMFatalError        retrying cannot help: auth, bad request, unknown model
    ├── StorageError             the artifact store cannot be read or written
    ├── ContractError            a data contract (GX suite) cannot be built, read or checked
    ├── LedgerError              the run ledger's database cannot be reached or migrated
    ├── SlotWaitError            no shared concurrency slot came free within DSSTAR_SLOT_WAIT
    ├── OverBudget               the next model call would pass the run's ceiling
    ├── CrashLoop                a run crashed its worker more often than it may be resumed
    ├── RunEnded                 a run ended without an answer (failed, over budget, stopped by
    │                            a person); carries the run's result
    └── AgentError               an agent's replies never became usable (e.g. no plan step)

    Interrupted                  SIGINT or SIGTERM asked a command to stop (a BaseException,
                                 like KeyboardInterrupt, so `except Exception` lets it pass)

Malformed replies are normally *not* errors: each agent's `parse` turns them into a defined
outcome (a failed attempt, a "No", an "Add Step"). AgentError is for the rare case where the
loop cannot go on at all.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "ConfigError",
    "ContractError",
    "CrashLoop",
    "DSStarError",
    "DataError",
    "ForbiddenError",
    "Interrupted",
    "RunEnded",
    "LLMError",
    "LLMFatalError",
    "LLMTransientError",
    "LedgerError",
    "OverBudget",
    "RunIdInUse",
    "SlotWaitError",
    "StorageError",
    "UsageError",
]


class DSStarError(Exception):
    """Base class of all dsstar errors."""


class UsageError(DSStarError):
    """The user asked for something that cannot work as given."""


class ConfigError(UsageError):
    """A setting is missing or invalid."""


class DataError(UsageError):
    """The data location is missing, empty or unreadable."""


class ForbiddenError(UsageError):
    """A run form (a flow run's parameters) asked for a setting or a data location that the
    worker running it does not allow."""


class RunIdInUse(UsageError):
    """Another run holds this run id (it is running), or a run under it has finished."""


class LLMError(DSStarError):
    """A model call failed."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class LLMTransientError(LLMError):
    """A model call failed in a way that a later retry may fix."""


class LLMFatalError(LLMError):
    """A model call failed in a way that no retry can fix."""


class StorageError(DSStarError):
    """The artifact store cannot be read or written."""


class ContractError(DSStarError):
    """A data contract cannot be built, read or checked (e.g. a malformed edited suite)."""


class LedgerError(DSStarError):
    """The run ledger's database cannot be reached, migrated, read or written."""


class AgentError(DSStarError):
    """An agent never produced a usable reply, so the run cannot continue."""


class SlotWaitError(DSStarError):
    """A shared concurrency limit stayed full for longer than the run may wait; the message
    names the limit, what holds it and the command that frees it."""


class OverBudget(DSStarError):
    """The next model call would pass the run's ceiling (DSSTAR_MAX_COST, DSSTAR_MAX_TOKENS).
    `need` says what that call may cost; `analyses` are the file analyses that finished
    before the stop, so that they are kept."""

    def __init__(self, message: str, need: str = "") -> None:
        super().__init__(message)
        self.need = need or message
        self.analyses: list = []


class CrashLoop(DSStarError):
    """A flow run crashed its worker more times than DSSTAR_MAX_CRASH_RETRIES allows it to be
    resumed after a crash; it fails instead of landing on the next worker."""


class RunEnded(DSStarError):
    """A run ended without an answer: `result` is its result (`dsstar run --json`). It is the
    data of the Failed or Cancelled state its flow run ends in, so that calling the flow
    raises it, named by its one-line reason, and a reader of the state finds the result."""

    def __init__(self, message: str, result: dict) -> None:
        super().__init__(message, result)
        self.result = result

    def __str__(self) -> str:
        return self.args[0]


class Interrupted(BaseException):
    """SIGINT or SIGTERM asked the command to stop; it unwinds the run, which is then marked
    `interrupted` and can be resumed."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {_signal_name(signum)}")
        self.signum = signum


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
