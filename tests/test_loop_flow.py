"""The core loop's guidance choices through the real flow: a person's answer stored for a
round (as a resumed run finds it) steers the flow's planner and router, accepts or stops.
(That a run which does not ask a human ignores such an answer: test_flow_e2e's two-round run.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_llm import text_of
from scenarios import ANSWER, two_rounds

from dsstar.errors import RunEnded
from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def answered(env: dict, run_id: str, choice: str, text: str = "") -> Path:
    """rounds/00/guidance.json of `run_id`, as the person's answer after round 00 left it."""
    folder = Path(env["DSSTAR_STORAGE"]) / "runs" / run_id
    path = folder / "rounds" / "00" / "guidance.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"choice": choice, "text": text, "timed_out": False}))
    return folder


def test_stored_guidance_reaches_the_flows_planner_and_router(env, llm, sales):
    text = "Take the manager's name from regions.json."
    folder = answered(env, "t-guided", "guide", text)
    two_rounds(llm)
    result = ds_star(question=QUESTION, data=str(sales), run_id="t-guided", ask_human=True)

    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert text in text_of(llm.calls("router")[0]) and text in text_of(llm.calls("planner")[1])
    stored = json.loads((folder / "rounds" / "00" / "guidance.json").read_text())
    assert stored == {"choice": "guide", "text": text, "timed_out": False}


def test_accept_finalizes_the_current_plan(env, llm, sales):
    answered(env, "t-accepted", "accept")
    two_rounds(llm)
    result = ds_star(question=QUESTION, data=str(sales), run_id="t-accepted", ask_human=True)

    assert result["status"] == "accepted" and result["answer"] == ANSWER
    assert result["rounds"] == 1 and llm.calls("router") == []


def test_stop_ends_the_run_without_an_answer_keeping_its_rounds(env, llm, sales):
    folder = answered(env, "t-stopped", "stop")
    two_rounds(llm)
    with pytest.raises(RunEnded, match="stopped by a person after round 00") as ended:
        ds_star(question=QUESTION, data=str(sales), run_id="t-stopped", ask_human=True)
    result = ended.value.result

    assert result["status"] == "stopped" and result["answer"] is None
    assert result["rounds"] == 1 and llm.calls("finalyzer") == []
    assert (folder / "rounds" / "00" / "code.py").exists()
    assert not (folder / "final" / "solution.py").exists()
    answer = json.loads((folder / "final" / "answer.json").read_text())
    assert answer == {"answer": None, "status": "stopped", "plan": result["plan"]}
    notebook = (folder / "final" / "notebook.ipynb").read_text()
    assert "Round 00" in notebook and "Final solution" not in notebook
    run = json.loads((folder / "run.json").read_text())
    assert run["status"] == "stopped" and run["round_table"][0]["verdict"] is False
