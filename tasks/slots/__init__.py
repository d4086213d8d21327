"""Concurrency slots: how much runs at once, LLM requests in flight and scripts running.

Every process keeps its own bound (a semaphore per kind and size), so one run never exceeds
its `--llm-concurrency` and `--max-parallel`, whatever the lake size. Under a shared Prefect
server (PREFECT_API_URL set by the user) every slot is also taken from a global concurrency
limit, `dsstar-llm` or `dsstar-exec`, so that all the runs of that server share one budget.
`dsstar serve` creates (or resets) those limits; a run creates one with its own value when
it is missing, and otherwise leaves the server's value alone (it can be changed in the
Prefect UI). How a slot held by a process that died comes back: see `_leases`; the few
calls of Prefect's concurrency API this needs are in `_api`, holder records in `_holders`.

A command's own temporary server (`flows.api_server`) serves that one process, so its
runs keep to their local bound and take no server slot: such a server keeps its leases in
memory while the counts live in the database every run of the user shares, and a slot
counted there by a server that is gone could never be given back.

With DSSTAR_LLM_RPM, LLM requests are also paced: at most that many start per minute,
shared the same way through a rate limit `dsstar-llm-rpm` (a global limit whose slots decay
at RPM/60 per second), or kept in the process without a server.
"""

from tasks.slots._limits import (
    LIMIT_NAMES,
    PRIVATE_API_ENV,
    RATE_NAME,
    ensure_limit,
    ensure_rate,
    holder_records,
    inspect,
    pace,
    server_url,
    slot,
)

__all__ = [
    "LIMIT_NAMES",
    "PRIVATE_API_ENV",
    "RATE_NAME",
    "ensure_limit",
    "ensure_rate",
    "holder_records",
    "inspect",
    "pace",
    "server_url",
    "slot",
]
