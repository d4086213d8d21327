"""A round's verifier, router and planner asked at once (dsstar.algorithm.together), with an
in-process runtime: which calls are made, in what order the decisions follow, what is kept
unused, and how the run's ceiling (the real meter) bounds calls in flight together."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsstar.algorithm import loop
from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.guidance import Checkpoint, Guidance
from dsstar.algorithm.runtime import Budget, Round
from dsstar.algorithm.verdict import Status
from dsstar.errors import OverBudget
from dsstar.execution.sandbox import ExecResult
from dsstar.model.ceiling import Ceiling, Meter
from dsstar.model.llm import Message, prompt_hash
from dsstar.model.pricing import Estimate

PROBLEM = loop.Problem("Which region sold most?", "a region name")
STEPS = ["Load the orders.", "Average the prices.", "Sum revenue per region."]
AHEAD = Budget(ask_ahead=True)


def code(n: int) -> str:
    return f"```python\nprint('round {n}')\n```"


@dataclass
class Scripted:
    """A runtime in this process: each agent's replies in order, every call and decision
    noted in `events`. With `meet`, round NN's verifier, router and planner (rNN+1) each
    wait, on their first asking, until the other two have been asked: if they were asked
    one after another the run would fail (BrokenBarrierError), never pass by chance. With a
    `ceiling`, every call holds a fixed bound on the real meter and spends `spend` tokens; a
    round's calls come to the meter in the order they are asked (verifier, router, planner),
    as their requests leave in that order, so which one a tight ceiling refuses is known."""

    replies: dict[str, list[str]]
    meet: bool = False
    person: bool = False
    ceiling: Ceiling | None = None
    spend: int = 10
    run_id: str = "together-test"
    events: list[tuple[Any, ...]] = field(default_factory=list)
    asked: list[tuple[str, str, str, str]] = field(default_factory=list)  # agent, label, hash, text
    rounds: list[Round] = field(default_factory=list)
    meter: Meter = field(default_factory=Meter)
    most_held: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _met: set[str] = field(default_factory=set)
    _barriers: dict[str, threading.Barrier] = field(default_factory=dict)
    _came: dict[str, threading.Event] = field(default_factory=dict)  # label -> at the meter

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        self._meet(label)
        if self.ceiling is None:
            return self._reply(agent, label, messages)
        self._came_after(self._before(label))
        try:
            holding = self.meter.hold(self.ceiling, Estimate(100, None), label)
            holding.__enter__()
        finally:
            self._came_at(label)
        with contextlib.ExitStack() as stack:
            stack.push(holding)
            with self._lock:
                self.most_held = max(self.most_held, self.meter.tokens + self.meter._held_tokens)
            text = self._reply(agent, label, messages)
            self.meter.charge({"label": label, "request": prompt_hash(messages),
                               "input_tokens": self.spend, "output_tokens": 0})  # fmt: skip
            return text

    @staticmethod
    def _before(label: str) -> str | None:
        """The call asked just before `label` in a round asked at once."""
        agent, _, rest = label.partition(" r")
        if "#" in rest or not rest.isdigit():
            return None
        number = int(rest)
        if agent == "router":
            return f"verifier r{number:02d}"
        if agent == "planner" and number > 0:
            return f"router r{number - 1:02d}"
        return None

    def _event(self, label: str) -> threading.Event:
        with self._lock:
            return self._came.setdefault(label, threading.Event())

    def _came_at(self, label: str) -> None:
        self._event(label).set()

    def _came_after(self, label: str | None) -> None:
        if label is not None:
            self._event(label).wait(timeout=30)

    def _reply(self, agent: str, label: str, messages: list[Message]) -> str:
        with self._lock:
            text = self.replies[agent].pop(0)
            prompt = "\n".join(str(m["content"]) for m in messages)
            self.asked.append((agent, label, prompt_hash(messages), prompt))
            self.events.append(("ask", label))
        return text

    def _meet(self, label: str) -> None:
        agent, _, rest = label.partition(" r")
        if not self.meet or "#" in rest or agent not in ("verifier", "router", "planner"):
            return
        number = int(rest) - (agent == "planner")
        with self._lock:
            if label in self._met or number < 0:
                return
            self._met.add(label)
            barrier = self._barriers.setdefault(str(number), threading.Barrier(3, timeout=10))
        barrier.wait()

    def execute(self, label: str, code: str, files: Sequence[str] | None = None) -> ExecResult:
        out = code.split("'")[1]
        return ExecResult(True, 0, out, False, 0.0, False, "none", stdout=out)

    def record_round(self, round: Round) -> None:
        self.rounds.append(round)
        self.events.append(("round", round.number, round.verdict.sufficient))

    def record_route(self, number: int, route: Route) -> None:
        self.events.append(("route", number, route.label))

    def record_guidance(self, number: int, guidance: Guidance) -> None:
        self.events.append(("guidance", number))

    def ask_human(self, checkpoint: Checkpoint) -> Guidance | None:
        self.events.append(("human", checkpoint.round))
        return None

    def asks_human(self) -> bool:
        return self.person

    def labels(self, agent: str) -> list[str]:
        return [label for a, label, _, _ in self.asked if a == agent]

    def unused(self) -> dict[int, list[str]]:
        return {r.number: [a.label for a in r.unused] for r in self.rounds if r.unused}


def add_step_then_yes() -> dict[str, list[str]]:
    return {
        "planner": [STEPS[0], STEPS[2], "Something for round 02."],
        "coder": [code(0), code(1)],
        "verifier": ["No", "Yes"],
        "router": ["Add Step", "Add Step"],
    }


def test_the_three_are_asked_at_once_and_a_yes_leaves_router_and_planner_unused() -> None:
    rt = Scripted(add_step_then_yes(), meet=True)
    outcome = loop.rounds(rt, PROBLEM, AHEAD)

    assert outcome.status is Status.VERIFIED and outcome.plan == [STEPS[0], STEPS[2]]
    assert rt.labels("planner") == ["planner r00", "planner r01", "planner r02"]
    assert rt.labels("router") == ["router r00", "router r01"]
    # Round 00's router and planner replies were followed; round 01's were not.
    assert rt.unused() == {1: ["router r01", "planner r02"]}
    assert {a.request for a in rt.rounds[1].unused} == {
        h for a, label, h, _ in rt.asked if label in ("router r01", "planner r02")
    }
    decisions = [e for e in rt.events if e[0] in ("round", "route")]
    assert decisions == [("round", 0, False), ("route", 1, "Add Step"), ("round", 1, True)]


def test_a_backtrack_discards_the_planner_reply_and_asks_again_with_what_was_dropped() -> None:
    replies = {
        "planner": [STEPS[0], STEPS[1], "(speculative, discarded)", STEPS[2], "(unused)"],
        "coder": [code(0), code(1), code(2)],
        "verifier": ["No", "No", "Yes"],
        "router": ["Add Step", "Step 2 is wrong!", "Add Step"],
    }
    rt = Scripted(replies, meet=True)
    outcome = loop.rounds(rt, PROBLEM, AHEAD)

    assert outcome.status is Status.VERIFIED and outcome.plan == [STEPS[0], STEPS[2]]
    assert rt.labels("planner") == [
        "planner r00", "planner r01", "planner r02", "planner r02", "planner r03"
    ]  # fmt: skip
    first, again = [(h, text) for a, label, h, text in rt.asked if label == "planner r02"]
    assert first[0] != again[0]  # a different request: the second one is told what went wrong
    assert STEPS[1] in again[1] and "Step 2 is wrong!" in again[1]
    assert "Step 2 is wrong!" not in first[1]
    assert rt.unused() == {1: ["planner r02"], 2: ["router r02", "planner r03"]}
    assert rt.rounds[1].unused[0].request == first[0]
    # The re-asked planner comes after round 01 is recorded and its route is told.
    order = [e for e in rt.events if e[0] in ("round", "route") or e[1] == "planner r02"]
    assert order[:5] == [
        ("round", 0, False), ("route", 1, "Add Step"), ("ask", "planner r02"),
        ("round", 1, False), ("route", 2, "Step 2"),
    ]  # fmt: skip
    assert order[5] == ("ask", "planner r02")


def test_by_default_the_calls_are_one_after_another() -> None:
    rt = Scripted(add_step_then_yes())
    outcome = loop.rounds(rt, PROBLEM, Budget())

    assert outcome.status is Status.VERIFIED
    assert [label for kind, label, *_ in rt.events if kind == "ask"] == [
        "planner r00", "coder r00", "verifier r00", "router r00", "planner r01", "coder r01",
        "verifier r01",
    ]  # fmt: skip
    assert rt.unused() == {} and ("human", 0) in rt.events


def test_with_a_person_to_ask_the_router_waits_for_the_verdict() -> None:
    rt = Scripted(add_step_then_yes(), person=True)
    loop.rounds(rt, PROBLEM, AHEAD)

    asks = [e[1] for e in rt.events if e[0] in ("ask", "human")]
    assert asks.index("verifier r00") < asks.index(0) < asks.index("router r00")
    assert rt.labels("router") == ["router r00"] and rt.unused() == {}


def test_after_the_last_round_nobody_is_asked_ahead() -> None:
    replies = {
        "planner": [STEPS[0], STEPS[2]],
        "coder": [code(0), code(1)],
        "verifier": ["No", "No"],
        "router": ["Add Step"],
    }
    rt = Scripted(replies)
    outcome = loop.rounds(rt, PROBLEM, Budget(ask_ahead=True, max_rounds=1))

    assert outcome.status is Status.MAX_ROUNDS
    assert rt.labels("router") == ["router r00"] and rt.labels("planner")[-1] == "planner r01"


def test_the_ceiling_holds_calls_in_flight_together_and_refuses_what_cannot_fit() -> None:
    # Every call holds 100 tokens and spends 10. Round 00 spends 30 (planner, coder,
    # verifier... ) and its three calls at once would hold 300 more: the ceiling of 230 lets
    # no more than two be in flight, and never is passed by what is spent and held.
    rt = Scripted(add_step_then_yes(), ceiling=Ceiling(max_tokens=230))
    outcome = loop.rounds(rt, PROBLEM, AHEAD)

    assert outcome.status is Status.VERIFIED
    assert rt.most_held <= 230
    assert rt.unused() == {1: ["router r01", "planner r02"]}


def test_a_speculative_call_refused_at_the_ceiling_is_not_sent_and_not_needed_after_a_yes() -> None:
    # Round 00's planner and coder spend 20. At 135 the verifier and then one of the router
    # and the planner fit (30 + 100); the other waits for them to settle, then finds
    # 135 - 40 = 95 left for its 100: refused, never sent. The verifier said Yes, so neither
    # reply was needed: the run is verified, the answered one kept unused.
    replies = {"planner": [STEPS[0], "unused"], "coder": [code(0)], "verifier": ["Yes"],
               "router": ["Add Step"]}  # fmt: skip
    rt = Scripted(replies, ceiling=Ceiling(max_tokens=135))
    outcome = loop.rounds(rt, PROBLEM, AHEAD)

    assert outcome.status is Status.VERIFIED
    assert rt.meter.stopped  # a call was refused
    sent = [label for _, label, _, _ in rt.asked]
    assert len({"router r00", "planner r01"} & set(sent)) == 1
    assert rt.unused() == {0: [label for label in sent if label in ("router r00", "planner r01")]}
    assert rt.most_held <= 135 and rt.meter.tokens == 40


def test_a_speculative_call_refused_at_the_ceiling_is_asked_again_when_needed() -> None:
    # As above, but the verdict (No) and Add Step need both replies: the refused one is
    # asked again alone, refused again, and the run stops at its ceiling, as asked one
    # after another it would.
    rt = Scripted(add_step_then_yes(), ceiling=Ceiling(max_tokens=135))
    with pytest.raises(OverBudget):
        loop.rounds(rt, PROBLEM, AHEAD)

    sent = [label for _, label, _, _ in rt.asked]
    assert len({"router r00", "planner r01"} & set(sent)) == 1  # the other was refused
    assert rt.most_held <= 135 and rt.meter.tokens == 40


def test_the_setting_is_off_by_default_and_reaches_the_loop_and_the_run_form(tmp_path) -> None:
    from dsstar.inputs.form import RunForm
    from dsstar.inputs.spec import run_spec
    from dsstar.settings import Settings

    assert Settings.model_fields["ask_ahead"].default is False  # no reply paid for and unread
    assert Budget().ask_ahead is False
    on = Settings(model="openai/gpt-4o-mini", ask_ahead=True)
    assert run_spec(on, "r", str(tmp_path), tmp_path).budget.ask_ahead is True
    form = RunForm(question="q?", data=str(tmp_path), ask_ahead=True)
    assert form.settings().ask_ahead is True and form.chosen() == {"ask_ahead": True}
