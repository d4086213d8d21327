"""Recorded replies (dsstar.model.recorded) served through litellm, and the comparison of a
stored run with its replay (dsstar.views.replay): in-process, no server."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO

from dsstar.errors import LLMFatalError
from dsstar.model.config import LLMConfig
from dsstar.model.llm import complete
from dsstar.model.pricing import priced
from dsstar.model.recorded import Recording, recorded_location, replies_source
from dsstar.storage import Store
from dsstar.views.replay import compare_runs

ASK = [{"role": "user", "content": "Which region sold most?"}]


def kept(folder, label: str, text: str, name: str) -> None:
    """A reply record as tasks/llm.py keeps it under runs/<run_id>/replies/."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"agent": label.split()[0], "label": label, "text": text, "input_tokens": 812}
    (folder / name).write_text(json.dumps(record))


def test_a_recorded_model_answers_by_label_through_litellm_for_nothing(tmp_path):
    replies = tmp_path / "replies"
    kept(replies, "coder r01", "Here it is.\n\n```python\nprint(1)\n```", "coder-r01-1f2e.json")
    kept(replies, "verifier r01", "It answers the question.\n\nYes", "verifier-r01-9a8b.json")
    config = LLMConfig(model=f"recorded/{replies}")
    # Another prompt than the recorded run's (the data changed): the label finds the reply.
    reply = complete(config, ASK, agent="verifier", run_id="r", label="verifier r01")
    assert reply.text == "It answers the question.\n\nYes"
    assert (reply.input_tokens, reply.output_tokens, reply.cost_usd) == (0, 0, 0.0)
    assert priced(config.model)  # a cost ceiling can bound it: it costs nothing
    with pytest.raises(LLMFatalError, match="no reply is recorded for 'debugger r01 #1'"):
        complete(config, ASK, agent="debugger", run_id="r", label="debugger r01 #1")


def test_a_run_folder_adds_the_replies_that_made_the_descriptions_it_reused(tmp_path):
    runs = tmp_path / "runs"
    kept(runs / "b" / "replies", "planner r00", "Sum revenue per region.", "planner-r00-1.json")
    attempts = runs / "b" / "analysis" / "orders_2024.csv" / "attempts.json"
    attempts.parent.mkdir(parents=True)
    attempts.write_text(json.dumps({"path": "orders_2024.csv", "analyzed_in_run": "a"}))
    earlier = runs / "a" / "replies"
    kept(earlier, "analyzer orders_2024.csv", "```python\nprint(1)\n```", "analyzer-1.json")
    kept(earlier, "debugger analysis orders_2024.csv #1", "```python\nprint(2)\n```", "d.json")
    kept(earlier, "analyzer regions.json", "not reused by b", "analyzer-2.json")
    kept(earlier, "planner r00", "another question's plan", "planner-r00-2.json")
    recording = Recording(str(runs / "b"))
    assert recording.reply("planner r00").text == "Sum revenue per region."
    assert recording.reply("analyzer orders_2024.csv").text == "```python\nprint(1)\n```"
    assert recording.reply("debugger analysis orders_2024.csv #1").text.endswith("print(2)\n```")
    with pytest.raises(LookupError):
        recording.reply("analyzer regions.json")


def test_a_run_kept_in_s3_answers_from_its_replies_folder_there(s3):
    """moto's S3 server: `dsstar replay` of a run stored in a bucket reads its replies there."""
    store = Store(s3)
    record = {"agent": "planner", "label": "planner r00", "text": "Load the orders."}
    store.write_json("runs/a/replies/planner-r00-77aa.json", record)
    config = LLMConfig(model=f"recorded/{store.uri('runs/a/replies')}")
    reply = complete(config, ASK, agent="planner", run_id="b", label="planner r00")
    assert reply.text == "Load the orders."


def test_a_recording_file_maps_labels_to_replies_with_or_without_reasoning(tmp_path):
    path = tmp_path / "replies.yaml"
    path.write_text(
        yaml.safe_dump(
            {"planner r00": "Load the orders.", "verifier r00": {"text": "No", "reasoning": "hm"}}
        )
    )
    recording = Recording(str(path))
    assert recording.reply("planner r00").text == "Load the orders."
    assert recording.reply("verifier r00").reasoning == "hm"
    with pytest.raises(LookupError, match="'router r00'"):
        recording.reply("router r00")


def test_the_shipped_demo_recording_answers_every_agent_of_a_two_round_run():
    recording = yaml.safe_load((REPO / "examples" / "sales-replies.yaml").read_text())
    for agent in ("planner", "coder", "verifier"):
        assert {f"{agent} r00", f"{agent} r01"} <= set(recording)
    assert "router r00" in recording and "finalyzer" in recording
    # A run with reuse on (a run form's default) over a question answered before asks this.
    assert "Yes" in recording["verifier reuse"]
    assert all("```python" in recording[label] for label in recording if "coder" in label)


def test_what_answers_a_run_is_named_by_its_models():
    assert recorded_location("recorded/examples/replies.yaml") == "examples/replies.yaml"
    assert recorded_location("openai/gpt-4o") is None
    assert replies_source(["openai/gpt-4o"]) == {"replies": "model", "recorded_from": None}
    assert replies_source(["recorded/s3://b/runs/x/replies"]) == {
        "replies": "recorded",
        "recorded_from": "s3://b/runs/x/replies",
    }
    assert replies_source(["recorded/a.yaml", "openai/gpt-4o"])["replies"] == "mixed"


def _run(store: Store, run_id: str, outputs: list[str], answer: str | None, status: str) -> None:
    for number, output in enumerate(outputs):
        store.write_text(f"runs/{run_id}/rounds/{number:02d}/output.txt", output)
        store.write_text(f"runs/{run_id}/rounds/{number:02d}/code.py", f"print({number})")
    store.write_json(f"runs/{run_id}/run.json", {"answer": answer, "status": status})


def test_a_replay_is_the_same_when_every_output_and_the_answer_are(tmp_path):
    store = Store(str(tmp_path))
    _run(store, "a", ["NE 25.0\nSW 36.0\n", "Northeast"], "Northeast, Ada Park", "verified")
    _run(store, "b", ["NE 25.0\nSW 36.0", "Northeast"], "Northeast, Ada Park", "verified")
    compared = compare_runs(store, "a", "b")
    assert compared["same"] and all(r["change"] is None for r in compared["rounds"])


def test_a_replay_names_the_first_changed_line_a_missing_round_and_the_answer(tmp_path):
    store = Store(str(tmp_path))
    _run(store, "a", ["NE 25.0\nSW 36.0", "Northeast"], "Northeast, Ada Park", "verified")
    _run(store, "b", ["NE 25.0\nSW 3600.0\nMW 1.0"], None, "failed")
    store.write_json("runs/b/run.json", {"answer": None, "status": "failed", "error": "no reply"})
    compared = compare_runs(store, "a", "b")
    assert not compared["same"]
    first, second = compared["rounds"]
    assert first["change"] == "output line 2: was 'SW 36.0', now 'SW 3600.0' (2 lines differ)"
    assert second["change"] == "not reached by the replay"
    assert compared["answer"]["change"] == (
        "was 'Northeast, Ada Park' (verified), now no answer (failed): no reply"
    )


def test_a_label_travels_in_its_header_as_ascii_and_comes_back_whole():
    # a label names a file, whose name may be any text, or not even UTF-8 (a lone surrogate)
    from dsstar.model.recorded import call_header, call_label

    for label in ("coder r01", "analyzer é ✓ 😀/x 100%.csv", "analyzer f\udcae\xc8$.csv"):
        header = call_header(label)
        header.encode("ascii")
        assert call_label(header) == label
