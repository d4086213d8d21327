"""A round's verifier, router and planner asked at once, end to end: `dsstar run` with a real
Prefect server, the sandbox, and a scripted model that takes its time over every reply. The
three requests are in flight together, the decisions are the paper's, the discarded replies
are stored with their round, and a resumed run asks none of them again."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import forked_cli
import pytest
from fake_llm import Error, FakeLLM, text_of
from scenarios import (
    ANSWER,
    FINAL_ONLY_ANSWER,
    JOIN,
    LOAD,
    answered,
    asked,
    describe_script,
    fence,
)

from dsstar.model.recorded import call_label

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
DELAY = 0.5  # seconds the model takes over each reply of the rounds
PATIENCE = 20.0  # seconds it waits for the other requests of a round (see slow_model)
STEPS = [
    "Load the orders and compute revenue per region.",
    "Average the unit prices per region.",
    "Join the best region with regions.json to find its manager.",
]


@pytest.fixture
def together(env, fresh_limits):
    """A run's environment on limits no earlier test's killed run still holds slots of; each
    run asks ahead by its flag (`--ask-ahead`), and a resumed run by its stored settings."""
    return env


def dsstar(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )


def slow_model(llm: FakeLLM) -> None:
    """Every reply of the rounds after DELAY, the arrival of each request noted on it. The
    model also waits, up to PATIENCE, for the three requests a round may send together (the
    verdict and route of round N, the step for round N+1, known by their call labels) to be
    there before it answers any of them: a loaded machine may start them apart, but only
    calls made one after another never meet. Gathering by label, not by count, keeps a
    retried request from being counted twice."""
    gathered, met = threading.Condition(), {}

    def trio_of(request: dict[str, Any]) -> int | None:
        agent, _, label = call_label(request["headers"].get("x-dsstar-call", "")).partition(" ")
        number = int(label[1:]) if re.fullmatch(r"r\d+", label) else None
        if agent in ("verifier", "router") and number is not None:
            return number
        # The next step asked with a verdict (not the first step, nor the one a backtrack asks).
        if agent == "planner" and number and "Step 2 is wrong!" not in text_of(request):
            return number - 1
        return None

    def wait(request: dict[str, Any]) -> None:
        request["arrived"] = time.monotonic()
        trio = trio_of(request)
        if trio is not None:
            with gathered:
                met.setdefault(trio, set()).add(request["agent"])
                gathered.notify_all()
                gathered.wait_for(lambda: len(met[trio]) == 3, timeout=PATIENCE)
        time.sleep(DELAY)

    llm.intercept(wait)


def backtrack_at_once(llm: FakeLLM, coder_fails: bool = False) -> None:
    """No/Add Step, No/"Step 2 is wrong!", then Yes: each agent's replies in the order its
    calls are made when the three are asked together (the planner's next step is asked
    with every verdict, then asked again after the backtrack)."""
    llm.default("analyzer", describe_script)
    llm.script(
        "planner",
        STEPS[0],
        STEPS[1],  # asked with round 00's verdict: followed
        "Sum the units per region.",  # asked with round 01's verdict: discarded (backtrack)
        STEPS[2],  # asked again, told what was dropped
        "Anything for round 03.",  # asked with round 02's verdict (Yes): unused
    )
    wrong = fence(LOAD + "\nprint('WRONG_STEP_MARKER')\n")
    third = [Error(400, "scripted bad request"), fence(JOIN)] if coder_fails else [fence(JOIN)]
    llm.script("coder", fence(LOAD), wrong, *third)
    llm.script("verifier", "No", "No", "Yes")
    llm.script("router", "Add Step", "Step 2 is wrong!", "Add Step")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER))


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the server was answering `a` and `b` at the same time."""
    return a["arrived"] < b["at"] and b["arrived"] < a["at"]


def test_a_round_waits_for_its_three_calls_at_once_and_keeps_what_it_discards(together, llm, sales):
    slow_model(llm)
    backtrack_at_once(llm)
    done = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json", "--ask-ahead",
                  "--run-id", "at-once")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert result["plan"] == [STEPS[0], STEPS[2]]

    verifier, router, coder = llm.calls("verifier"), llm.calls("router"), llm.calls("coder")
    planner = llm.calls("planner")
    # After each round's script: verifier, router and the next step in flight together.
    for n, speculative in enumerate((planner[1], planner[2], planner[4])):
        trio = (verifier[n], router[n], speculative)
        assert all(overlap(a, b) for a in trio for b in trio if a is not b), n
    # The coder of the next round waits for all three (two latencies, not four).
    assert coder[1]["arrived"] > max(verifier[0]["at"], router[0]["at"], planner[1]["at"])
    # A backtrack: the planner is asked again after the router, told what was dropped.
    assert planner[3]["arrived"] > router[1]["at"] and STEPS[1] in text_of(planner[3])
    assert coder[2]["arrived"] > planner[3]["at"]

    run = Path(together["DSSTAR_STORAGE"]) / "runs" / "at-once"
    verdicts = [json.loads((run / f"rounds/{n:02d}/verdict.json").read_text()) for n in range(3)]
    unused = [[u["label"] for u in v["unused"]] for v in verdicts]
    assert unused == [[], ["planner r02"], ["router r02", "planner r03"]]
    # Every reply asked is counted, the discarded ones too.
    assert result["llm_calls"] == len(llm.requests)


def test_a_resumed_run_reuses_every_finished_reply_used_or_not(together, llm, sales):
    slow_model(llm)
    backtrack_at_once(llm, coder_fails=True)
    first = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json", "--ask-ahead",
                   "--run-id", "at-once-resumed")  # fmt: skip
    assert first.returncode != 0 and "scripted bad request" in first.stderr, first.stderr[-3000:]
    before = list(llm.requests)
    # Round 01's discarded step was asked and answered before the run failed.
    assert "Sum the units per region." not in json.dumps(json.loads(first.stdout))
    assert len([r for r in before if r["agent"] == "planner"]) == 4

    second = dsstar("resume", "at-once-resumed", "--json")
    assert second.returncode == 0, second.stderr[-3000:]
    resumed = json.loads(second.stdout)
    assert resumed["status"] == "verified" and resumed["answer"] == ANSWER
    after = llm.requests[len(before) :]
    assert answered(before) & asked(after) == set()  # nothing answered is asked again
    assert [r["agent"] for r in after if r["agent"] != "analyzer"][:1] == ["coder"]
    assert resumed["llm_calls"] == len([r for r in llm.requests if r["status"] == 200])


def verified_in_round_00(llm: FakeLLM) -> None:
    """A question answered by its first step: the verifier's first verdict is Yes. The router
    and the next step are scripted too, as a model would answer them if asked."""
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Load the orders, compute revenue per region and join"
                " the best region with regions.json to find its manager.")  # fmt: skip
    llm.default("coder", lambda req: fence(JOIN))
    llm.default("verifier", lambda req: "The output names the best region and its manager.\n\nYes")
    llm.default("router", lambda req: "Add Step")
    llm.default("finalyzer", lambda req: fence(FINAL_ONLY_ANSWER))


def test_by_default_a_run_pays_for_no_reply_it_discards(together, llm, sales):
    """Verified in round 00: by default the model is asked for the step, the script, the
    verdict and the final script, nothing else; `--ask-ahead` also asks the router and the
    next step with the verdict, and both replies go unused (what asking ahead costs)."""
    verified_in_round_00(llm)
    counted = {}
    for run_id, flags in (("one-by-one", ()), ("ahead", ("--ask-ahead",))):  # not reused
        before = len(llm.requests)
        done = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json",
                      "--run-id", run_id, "--no-reuse", *flags)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert result["status"] == "verified" and result["answer"] == ANSWER
        sent = [r["agent"] for r in llm.requests[before:] if r["agent"] != "analyzer"]
        counted[run_id] = {agent: sent.count(agent) for agent in sorted(set(sent))}
        verdict = Path(together["DSSTAR_STORAGE"]) / "runs" / run_id / "rounds/00/verdict.json"
        counted[run_id]["unused"] = [u["label"] for u in json.loads(verdict.read_text())["unused"]]
    assert counted["one-by-one"] == {"coder": 1, "finalyzer": 1, "planner": 1, "verifier": 1,
                                     "unused": []}  # fmt: skip
    assert counted["ahead"] == {"coder": 1, "finalyzer": 1, "planner": 2, "router": 1,
                                "verifier": 1, "unused": ["router r00", "planner r01"]}  # fmt: skip
