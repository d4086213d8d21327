"""A ceiling no run passes: what a run has spent on model calls, and the check made before
each call is sent.

A `Meter` per run (in this process) counts every reply the run receives, once each however
often it is seen again (a resumed run reads its finished calls back from the caches and
counts them anew, at what they cost the first time: they are not paid again). Before a call
is sent, `Meter.hold` reserves its bound (`dsstar.model.pricing.estimate`) on top of what was
spent and what calls in flight hold, its output limit lowered to what is left; when even
the least output worth asking for would pass the ceiling it raises `OverBudget` and the
call is not sent. The request carries the output limit held, so no reply of a server that
honours it spends more than its bound. A server that ignores it is counted at the tokens it
reports (what it bills; its text is cut to the limit, `dsstar.model.llm.complete`): such a
reply can take a run past its ceiling, and the run's next call is then refused. Concurrent
calls (file analyses) hold their bounds together, so none of them can pass the ceiling either.

A report's sub-runs count on the report's meter (`share`): one ceiling bounds the report
with all its sub-runs, however many run at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

from dsstar.errors import OverBudget
from dsstar.model.pricing import Estimate

__all__ = ["Ceiling", "Meter", "call_id", "forget", "meter", "share", "spent_line"]


@dataclass(frozen=True)
class Ceiling:
    """The most a run may spend (the settings max_cost and max_tokens); None: no bound."""

    max_cost: float | None = None
    max_tokens: int | None = None

    def __bool__(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None


def call_id(call: dict[str, Any]) -> str:
    """What makes a call the same call (the LLM task's cache key: label, model, request)."""
    return "{}|{}|{}".format(call.get("label"), call.get("model"), call.get("request"))


# What the meter keeps of each reply: what makes it the same call, and what it spent.
_COUNTED = ("agent", "label", "model", "request", "input_tokens", "output_tokens",
            "cached_tokens", "cost_usd", "latency_s")  # fmt: skip


class Meter:
    """What one run spent: cost and tokens; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # a call in flight has settled
        self._seen: set[str] = set()
        self._calls: list[dict[str, Any]] = []  # every reply counted, once each
        self.cost_usd = 0.0
        self.tokens = 0
        self._held_cost = 0.0
        self._held_tokens = 0
        self.stopped = False  # a call was refused: the run starts nothing more

    def charge(self, call: dict[str, Any]) -> None:
        """Count a reply (a call record: tokens and cost), unless it was counted before."""
        with self._lock:
            key = call_id(call)
            if key in self._seen:
                return
            self._seen.add(key)
            self._calls.append({k: call.get(k) for k in _COUNTED})  # the reply's text left out
            self.cost_usd += call.get("cost_usd") or 0.0
            self.tokens += int(call.get("input_tokens") or 0) + int(call.get("output_tokens") or 0)

    def calls(self) -> list[dict[str, Any]]:
        """Every reply counted so far, in the order they came (their records without the
        text): those of analyses still running included, which the run records only when
        they finish."""
        with self._lock:
            return list(self._calls)

    @contextmanager
    def hold(self, ceiling: Ceiling, bound: Estimate, what: str) -> Iterator[Estimate]:
        """Reserve `bound` for the call `what` while it is in flight, its output limit
        lowered to what is left (down to `bound.least`); yields the bound held, whose
        `output` the request must carry. OverBudget when even the least could pass
        `ceiling`. Charge the reply before leaving, so the room is never free."""
        with self._settled:
            # Near the ceiling, calls in flight may leave too little room while they hold
            # their bounds: wait for them to settle (they cost less than their bounds).
            held = self._room(ceiling, bound, held=True)
            while self._held_tokens and held is None:
                self._settled.wait()
                held = self._room(ceiling, bound, held=True)
            if held is None:
                self.stopped = True
                self._refuse(ceiling, bound.at_least(), what)
            self._held_cost += held.cost_usd or 0.0
            self._held_tokens += held.tokens
        try:
            yield held
        finally:
            with self._settled:
                self._held_cost -= held.cost_usd or 0.0
                self._held_tokens -= held.tokens
                self._settled.notify_all()

    def _room(self, ceiling: Ceiling, bound: Estimate, held: bool) -> Estimate | None:
        """`bound` as it fits in what is left of `ceiling` (None: it does not fit)."""
        if ceiling.max_cost is not None and bound.cost_usd is None and not ceiling.max_tokens:
            return None  # no price, no token ceiling: nothing can bound it (see _refuse)
        cost_used = self.cost_usd + (self._held_cost if held else 0.0)
        tokens_used = self.tokens + (self._held_tokens if held else 0)
        return bound.within(
            None if ceiling.max_tokens is None else ceiling.max_tokens - tokens_used,
            None if ceiling.max_cost is None else ceiling.max_cost - cost_used,
        )

    def _refuse(self, ceiling: Ceiling, least: Estimate, what: str) -> NoReturn:
        """Raise OverBudget for the call that cannot fit, what is in flight having settled;
        `least` is the smallest bound it could have been sent with."""
        if ceiling.max_cost is not None and least.cost_usd is None and not ceiling.max_tokens:
            # Preflight refuses this; it can happen when a resume names another model.
            raise OverBudget(f"no price is known for the model of the next call ({what}),"
                             " so --max-cost cannot bound it: set --max-tokens")  # fmt: skip
        cost = least.cost_usd or 0.0
        if ceiling.max_cost is not None and self.cost_usd + cost > ceiling.max_cost:
            need = f"the next call ({what}) may cost up to ${cost:.4f}"
            left = f"${max(ceiling.max_cost - self.cost_usd, 0):.4f}"
            raise OverBudget(f"{need}, more than the {left} left of --max-cost", need)
        need = f"the next call ({what}) may use up to {least.tokens:,} tokens"
        left = f"{max((ceiling.max_tokens or 0) - self.tokens, 0):,}"
        raise OverBudget(f"{need}, more than the {left} left of --max-tokens", need)


class _SharedMeter:
    """The meter of a run that counts on another's (a report's sub-run on the report's):
    every reply charged to both, every call held against the other's ceiling, and `calls`
    only this run's own, which its record and ledger rows hold."""

    def __init__(self, parent: Meter) -> None:
        self.parent = parent
        self._own = Meter()  # this run's replies, counted once each; never held against

    def charge(self, call: dict[str, Any]) -> None:
        self._own.charge(call)
        self.parent.charge(call)

    def calls(self) -> list[dict[str, Any]]:
        return self._own.calls()

    def hold(self, ceiling: Ceiling, bound: Estimate, what: str) -> Any:
        return self.parent.hold(ceiling, bound, what)

    @property
    def stopped(self) -> bool:
        return self.parent.stopped

    @stopped.setter
    def stopped(self, value: bool) -> None:
        self.parent.stopped = value

    @property
    def cost_usd(self) -> float:
        return self.parent.cost_usd

    @property
    def tokens(self) -> int:
        return self.parent.tokens


_meters: dict[str, Meter | _SharedMeter] = {}
_meters_lock = threading.Lock()


def meter(run_id: str) -> Meter:
    """The meter of run `run_id` in this process (a new one the first time); a sub-run's
    counts on the meter of the run it shares (`share`)."""
    with _meters_lock:
        return _meters.setdefault(run_id, Meter())  # type: ignore[return-value]


def share(run_id: str, with_run: str) -> None:
    """Count run `run_id` on the meter of `with_run` (a report's sub-run on the report's)
    until `forget(run_id)`: its replies count against `with_run`'s ceiling too, while its
    own meter's `calls` stay its own."""
    with _meters_lock:
        parent = _meters.setdefault(with_run, Meter())
        while isinstance(parent, _SharedMeter):
            parent = parent.parent
        _meters[run_id] = _SharedMeter(parent)


def forget(run_id: str) -> None:
    """Drop the meter of a run that ended in this process (a resume counts afresh); for a
    sub-run that shared another's meter, only the sharing ends."""
    with _meters_lock:
        _meters.pop(run_id, None)


def spent_line(record: dict[str, Any], ceiling: Ceiling, need: str) -> str:
    """One line for a run that stopped at its ceiling: what it spent (its run.json totals),
    what remains, what the next call needed (`OverBudget.need`), and how to go on."""
    cost = record.get("cost_usd") or 0.0
    tokens = (record.get("input_tokens") or 0) + (record.get("output_tokens") or 0)
    parts = []
    if ceiling.max_cost is not None:
        left = max(ceiling.max_cost - cost, 0.0)
        parts.append(f"spent ${cost:.4f} of --max-cost ${ceiling.max_cost:.4f} (${left:.4f} left)")
    if ceiling.max_tokens is not None:
        left_tokens = max(ceiling.max_tokens - tokens, 0)
        parts.append(f"used {tokens:,} of --max-tokens {ceiling.max_tokens:,} tokens"
                     f" ({left_tokens:,} left)")  # fmt: skip
    flag = "--max-cost" if ceiling.max_cost is not None else "--max-tokens"
    return (
        f"over budget: {'; '.join(parts)}; {need}. Everything so far is stored; continue with"
        f" a higher ceiling: dsstar resume {record.get('run_id')} {flag} N"
    )
