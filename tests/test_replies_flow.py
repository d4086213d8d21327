"""Hostile replies and outputs through the whole flow: lone surrogates, invalid file names,
empty answers, unclear routing, megabyte outputs and escape sequences on the terminal. (A run
whose replies carry surrogates, failed by an outage and resumed: test_operate.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from fake_llm import text_of
from scenarios import ANSWER, FINAL_ONLY_ANSWER, JOIN, LOAD, describe_script, fence

from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
BAD = "\ud800"  # a lone surrogate, as a JSON escape in a reply decodes


def stored(env: dict, run_id: str) -> Path:
    return Path(env["DSSTAR_STORAGE"]) / "runs" / run_id


def cli(*args: str | bytes) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True,
        timeout=300,
        env=os.environ.copy(),
    )


def test_lone_surrogates_everywhere_do_not_break_a_run(env, llm, sales):
    (sales / os.fsdecode(b"bad \xff name.csv")).write_bytes(b"a,b\n1,\xff\xfe\n")
    llm.default("analyzer", lambda req: describe_script(req) + BAD)
    # The odd file name reaches the model as U+FFFD, so its script cannot open it: the
    # debugger is asked, gives up, and the built-in profiler describes the file.
    llm.default("debugger", lambda req: f"I cannot fix this {BAD}")
    llm.script(
        "planner",
        f"Load the orders {BAD} and compute revenue per region.",
        f"Join the best region with regions.json {BAD}.",
    )
    llm.script(
        "coder",
        fence(LOAD + f"\n# {BAD}\nprint('\\udcff')\n") + BAD,
        fence(JOIN) + BAD,
    )
    llm.script("verifier", f"No {BAD}", f"Yes{BAD}")
    llm.script("router", f"Add Step {BAD}")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER + f"\n# {BAD}") + BAD)
    result = ds_star(question=QUESTION, data=str(sales), run_id="t-surrogates")

    assert result["status"] == "verified" and result["answer"] == ANSWER
    run = json.loads((stored(env, "t-surrogates") / "run.json").read_text(encoding="utf-8"))
    assert run["status"] == "verified"
    for path in stored(env, "t-surrogates").rglob("*"):
        if path.is_file():
            path.read_text(encoding="utf-8")  # every stored object is valid UTF-8
    assert "\ufffd" in (stored(env, "t-surrogates") / "rounds/00/code.py").read_text()
    assert all(r["status"] == 200 for r in llm.requests)  # nothing was retried


def test_an_empty_answer_fails_with_a_reason_and_exit_1(env, llm, sales):
    llm.default("analyzer", describe_script)
    llm.script("planner", "Load the orders and compute revenue per region.")
    llm.script("coder", fence(LOAD))
    llm.script("verifier", "Yes")
    llm.script("finalyzer", fence("import sys\nprint('   ', file=sys.stderr)\nprint()"))
    question = QUESTION.encode() + b" \xff"  # an argument that is not valid UTF-8
    done = cli("run", "--data", str(sales), "--question", question, "--json", "--run-id", "t-e")

    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "failed" and result["answer"] is None
    assert "printed nothing" in result["error"]
    run = json.loads((stored(env, "t-e") / "run.json").read_text())
    assert run["status"] == "failed" and "printed nothing" in run["error"]
    assert run["question"] == QUESTION + " \ufffd"
    odd = os.fsencode(sales) + b"-\xff"
    shutil.copytree(sales, os.fsdecode(odd))
    bad_data = cli("run", "--data", odd, "--question", QUESTION)
    assert bad_data.returncode == 2 and b"not valid UTF-8" in bad_data.stderr


def test_router_sentences_from_the_issue_add_a_step_and_an_unclear_reply_is_asked_once_more(
    env, llm, sales
):
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Compute revenue per region and find its manager.")
    llm.default("coder", lambda req: fence(JOIN))
    llm.script("verifier", "No", "No", "No", "No", "No", "No", "Yes")
    llm.script(
        "router",
        # Rounds 01 to 04: the issue's sentences, each read at once as Add Step.
        "Step 1 is fine, add step",
        "Step 2 is correct.\n\nAdd Step",
        "Step 2 is not wrong, add step",
        "Step 1 and step 2 are correct. Add Step",
        # Round 05: unclear, then clear. Round 06: unclear twice, which reads as Add Step.
        "Step 1 is fine.",
        "Step 1 is wrong!",
        "Perhaps.",
        "Not sure.",
    )
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER))
    result = ds_star(question=QUESTION, data=str(sales), run_id="t-routes")

    assert result["status"] == "verified" and result["rounds"] == 7
    # Four steps added in rounds 01-04 (five in all), every step dropped in round 05 and
    # one planned again, a step added in round 06.
    assert len(result["plan"]) == 2
    decisions = [
        json.loads((stored(env, "t-routes") / f"rounds/{n:02d}/route.json").read_text())["decision"]
        for n in range(1, 7)
    ]
    assert decisions == ["Add Step"] * 4 + ["Step 1", "Add Step"]
    routers = llm.calls("router")
    assert len(routers) == 8  # the sentences each read at once: no second asking
    assert routers[5]["messages"][-2] == {"role": "assistant", "content": "Step 1 is fine."}
    assert "Step N is wrong!" in routers[5]["messages"][-1]["content"]


def test_prompts_stay_bounded_with_megabyte_outputs(env, llm, sales, monkeypatch):
    # A form may not raise a cap above the worker's own: this worker allows 4 MB of output.
    monkeypatch.setenv("DSSTAR_EXEC_OUTPUT_BYTES", "4000000")
    # Megabyte outputs, and megabyte replies too: a plan step and a script of 1 MB each.
    flood = "print('x' * 1_000_000)\nprint('TAIL-MARK')\n"
    llm.default("analyzer", lambda req: fence(f"print('{'d' * 100}' * 10_000)"))
    llm.default("planner", lambda req: "Print a lot. " * 80_000)
    llm.default("coder", lambda req: fence(flood + "# " + "c" * 1_000_000))
    llm.default("verifier", lambda req: "No")
    llm.default("router", lambda req: "Add Step")
    llm.default("finalyzer", lambda req: fence(flood + 'print("FINAL ANSWER:", "x")\n'))
    result = ds_star(
        question=QUESTION,
        data=str(sales),
        max_rounds=3,
        run_id="t-bounded",
        exec_output_bytes=4_000_000,
        max_output_chars=5000,
    )

    assert result["status"] == "max_rounds"
    sizes = {r["agent"]: [] for r in llm.requests}
    for request in llm.requests:
        sizes[request["agent"]].append(len(text_of(request)))
    # At most: four 6,000-character descriptions, a 5,000-character output, 40,000 characters
    # of code and three 2,000-character steps; the same in every round.
    assert max(max(s) for s in sizes.values()) < 80_000, sizes
    for agent in ("planner", "coder", "verifier", "router"):
        assert max(sizes[agent]) - min(sizes[agent][1:] or sizes[agent]) < 5_000, sizes
    assert "TAIL-MARK" in text_of(llm.calls("verifier")[-1])  # the tail is kept
    assert "characters left out" in text_of(llm.calls("router")[-1])


def test_plain_output_carries_no_escape_sequences(env, llm, sales):
    hostile = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31m"
    llm.default("analyzer", describe_script)
    llm.script("planner", "Load the orders and compute revenue per region.")
    llm.script("coder", fence(LOAD + f"\nprint('{hostile}')\n"))
    llm.script("verifier", "Yes")
    llm.script("finalyzer", fence(f"print('{hostile}Northeast')"))
    done = cli("run", "--data", str(sales), "--question", QUESTION, "--run-id", "t-esc")

    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout and b"\x07" not in done.stdout
    assert b"Northeast" in done.stdout
    shown = cli("runs", "show", "t-esc", "--round", "0")
    assert b"\x1b" not in shown.stdout and b"\x07" not in shown.stdout
    as_json = json.loads(cli("runs", "show", "t-esc", "--json").stdout)
    assert as_json["answer"].endswith("Northeast") and "\x1b" in as_json["answer"]  # exact
