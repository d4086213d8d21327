"""Fuzzed replies from every agent, lone surrogates and invalid UTF-8 included.

Two layers: the parse functions, the prompts and the text helpers directly (fast, thousands of
examples), and whole runs through the real flow, sandbox and litellm against the scripted model
server (slow, a few dozen). Neither may crash; no run may be verified without an answer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsstar.algorithm import agents
from dsstar.algorithm.agents import (
    analyzer,
    coder,
    debugger,
    finalyzer,
    planner,
    router,
    summarizer,
    verifier,
)
from dsstar.algorithm.agents._base import PLAN_STEP_CHARS, FileInfo
from dsstar.errors import DSStarError
from dsstar.model.llm import prompt_hash
from dsstar.storage import Store
from dsstar.text import clean, for_terminal

FAST = settings(max_examples=400, deadline=None)

# Any code point, lone surrogates ("Cs") included, which hypothesis leaves out by default.
ANY_CHAR = st.characters(exclude_categories=())
FRAGMENTS = [
    "Step 1", "step 2 is wrong!", "Step 3 is incorrect", "is not wrong", "isn't wrong",
    "Add Step", "add a step", "Yes", "No", "yes.", "**", "`", "```python\n", "```py\n", "```\n",
    "print(1)\n", "1.", "2)", "- ", "\n", "\n\n", " ", "\t", "\r\n", "\x00", "\ud800", "\udcff",
    "\ud83d\ude00", "\ufffd", "\x1b[31m", "\x1b]0;title\x07", "\x9b2J", "\u202e", "0", "99",
    "#", "Step", "wrong", "correct", "not", "\\", "{{ x }}", "{% if %}",
]  # fmt: skip
INVALID_UTF8 = st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape"))
REPLY = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(ANY_CHAR, max_size=30), INVALID_UTF8),
    max_size=12,
).map("".join)


@FAST
@given(REPLY, st.integers(0, 6))
def test_router_parse_never_fails(reply: str, plan_length: int) -> None:
    route = router.parse(reply, plan_length)
    assert route.wrong_step is None or 1 <= route.wrong_step <= plan_length
    assert route.clear or route.wrong_step is None
    assert route.label in {"Add Step", f"Step {route.wrong_step}"}


@FAST
@given(REPLY, st.integers(1, 9), st.integers(1, 9))
def test_an_explicit_wrong_step_wins(noise: str, step: int, plan_length: int) -> None:
    route = router.parse(f"Step {step} is wrong!\n{noise}", plan_length)
    lowest = route.wrong_step
    assert lowest is None or lowest <= step  # an earlier "Step N is wrong" in the noise wins
    if step <= plan_length and "wrong" not in noise.lower() and "incorrect" not in noise.lower():
        assert lowest == step


@FAST
@given(REPLY)
def test_text_parsers_never_fail(reply: str) -> None:
    assert isinstance(verifier.parse(reply), bool)
    step = planner.parse(reply)
    assert step is None or (step.strip() and len(step) <= PLAN_STEP_CHARS + 100)
    summary = summarizer.parse(reply)
    assert summary is None or summary.strip()


@FAST
@given(REPLY)
def test_code_parsers_never_fail(reply: str) -> None:
    for parse in (analyzer.parse, coder.parse, debugger.parse, finalyzer.parse):
        code = parse(reply)
        # Every line is the reply's (a block is dedented whole, as one inside a list item).
        assert code is None or (code.strip() and all(line in reply for line in code.splitlines()))


@FAST
@given(REPLY, REPLY, REPLY)
def test_every_prompt_renders_and_hashes_fuzzed_inputs(text: str, output: str, code: str) -> None:
    files = [FileInfo(f"data/{text[:20]}", text)]
    plan = [text, output[:50]]
    built = [
        analyzer.render(path=text, format=text),
        coder.render_initial(question=text, files=files, step=text),
        coder.render_next(question=text, files=files, plan=plan, base_code=code),
        debugger.render_analyzer(path=text, code=code, error=output),
        debugger.render_solution(question=text, code=code, error=output, files=files),
        finalyzer.render(
            question=text, guidelines=text, files=files, plan=plan, code=code, output=output
        ),
        planner.render_initial(question=text, files=files, previous_plan=plan),
        planner.render_next(question=text, files=files, plan=plan, last_output=output),
        planner.render_next(question=text, files=files, plan=[], last_output=output),
        router.render(question=text, plan=plan, output=output, files=files),
        router.render_again([], output, 2),
        summarizer.render(error=output),
        verifier.render(question=text, plan=plan, code=code, output=output),
    ]
    for messages in built:
        assert len(prompt_hash(messages)) == 16


@FAST
@given(REPLY)
def test_text_helpers_make_anything_safe(reply: str) -> None:
    cleaned = clean(reply)
    cleaned.encode("utf-8")
    assert clean(cleaned) == cleaned
    shown = for_terminal(reply)
    shown.encode("utf-8")
    assert not any(c < " " and c not in "\n\t" for c in shown) and "\x1b" not in shown
    assert "\x9b" not in shown and "\x7f" not in shown


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(REPLY, REPLY)
def test_storage_round_trips_fuzzed_text(tmp_path: Path, text: str, other: str) -> None:
    store = Store(str(tmp_path / "store"))
    store.write_text("runs/r/out.txt", text)
    store.write_json("runs/r/run.json", {"answer": text, other: [other]})
    assert store.read_text("runs/r/out.txt") == clean(text)
    assert store.read_json("runs/r/run.json") == {
        "answer": clean(text),
        clean(other): [clean(other)],
    }


# -- whole runs ---------------------------------------------------------------------------------

ANSWERS = ["Northeast", "", "   ", "\x1b[31mred\x1b[0m", "\ud800", "a\x00b", "é ✓ 😀"]
SCRIPTS = [
    "print({answer!r})",
    "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ' + {answer!r}.encode('utf-8', 'replace'))",
    "raise ValueError({answer!r})",
    "print('x' * 50_000)\nprint({answer!r})",
    "import sys\nprint({answer!r}, file=sys.stderr)",
    "print(open('data/' + __import__('os').listdir('data')[0], 'rb').read()[:40])",
]


def _script(draw_index: int, answer: str) -> str:
    return SCRIPTS[draw_index % len(SCRIPTS)].format(answer=answer)


CODE_REPLY = st.one_of(
    REPLY,
    st.builds(
        lambda i, a, noise: f"{noise}\n```python\n{_script(i, a)}\n```\n{noise}",
        st.integers(0, len(SCRIPTS) - 1),
        st.sampled_from(ANSWERS),
        REPLY,
    ),
)
VERDICT = st.one_of(st.sampled_from(["Yes", "No", "yes\ud800", "No.\x1b[0m"]), REPLY)
ROUTE = st.one_of(st.sampled_from(["Add Step", "Step 1 is wrong!", "Step 2", "2"]), REPLY)
AGENT_REPLIES = {
    "analyzer": CODE_REPLY,
    "debugger": CODE_REPLY,
    "coder": CODE_REPLY,
    "finalyzer": CODE_REPLY,
    "planner": st.one_of(st.just("Load the file and print it."), REPLY),
    "verifier": VERDICT,
    "router": ROUTE,
    "summarizer": REPLY,
}
RUN_REPLIES = st.fixed_dictionaries(
    {agent: st.lists(replies, min_size=1, max_size=4) for agent, replies in AGENT_REPLIES.items()}
)
FILE_NAME = st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\x00" not in b)

RUNS = {"count": 0, "replies": 0}


def _responder(replies: list[str]):
    state = {"i": 0}

    def respond(request: dict) -> str:
        reply = replies[state["i"] % len(replies)]
        state["i"] += 1
        return reply

    return respond


# 25 whole runs: on 2 cores shared with the rest of the suite they take longer than the
# suite's 300 s per test.
@pytest.mark.slow
@pytest.mark.timeout(900)
@settings(
    max_examples=int(os.environ.get("FUZZ_RUNS", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(replies=RUN_REPLIES, name=FILE_NAME, content=st.binary(max_size=200))
# Found by the search: a name that is not UTF-8 on a damaged archive (bzip2's magic alone), so
# that the only file is skipped and the run's error names it.
@example(
    replies={**{agent: [""] for agent in AGENT_REPLIES}, "verifier": ["Yes"]},
    name=b"\xae\xc8$\xe4\xe5ux", content=b"BZh",
)  # fmt: skip
def test_fuzzed_runs_end_cleanly(env, llm, tmp_path, replies, name, content) -> None:
    from flows.ds_star import completed_result, ds_star

    RUNS["count"] += 1
    run_id = f"fuzz-{RUNS['count']:03d}"
    data = tmp_path / run_id
    data.mkdir()
    with open(os.path.join(os.fsencode(data), b"f" + name + b".csv"), "wb") as handle:
        handle.write(content + run_id.encode())  # new content: every run analyzes afresh
    llm.reset()
    for agent, texts in replies.items():
        llm.default(agent, _responder(texts))

    state = ds_star(
        question="What does the file say? \ufffd \x1b[31m",
        data=str(data),
        max_rounds=3,
        reuse=False,
        run_id=run_id,
        max_debug_attempts=1,
        exec_timeout=20,
        return_state=True,
    )

    store = Store(env["DSSTAR_STORAGE"])
    record = store.read_json(f"runs/{run_id}/run.json")
    try:  # an answer, or a run that ended without one (Failed, its result its data)
        result = completed_result(state, env["DSSTAR_STORAGE"], run_id)
    except DSStarError:  # a stated failure, not a crash
        assert state.is_failed() and record["status"] == "failed" and record["error"]
    else:
        assert result["status"] in {"verified", "max_rounds", "failed"}
        if result["status"] == "failed":
            assert state.is_failed() and result.get("error")
        else:
            assert state.is_completed() and result["answer"], result  # never without an answer
    assert record["status"] != "running"
    for path in (Path(env["DSSTAR_STORAGE"]) / "runs" / run_id).rglob("*"):
        if path.is_file():
            path.read_bytes().decode("utf-8")  # every stored object is valid UTF-8
    json.dumps(record, ensure_ascii=False).encode("utf-8")
    RUNS["replies"] += len(llm.requests)
    error = str(record.get("error") or "")[:100]
    print(f"\n{run_id}: {record['status']} after {RUNS['replies']} fuzzed replies {error!r}")


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_reaches_the_state_and_the_logs_as_text(env, llm, tmp_path):
    """The run's only file is skipped, so its error names it: the flow run ends Failed with
    that message, and the failure line reaches the Logs tab (Prefect sends both as JSON)."""
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    from flows.ds_star import ds_star

    data = tmp_path / "lake"
    data.mkdir()
    with open(os.path.join(os.fsencode(data), b"f\xae\xc8.csv"), "wb") as handle:
        handle.write(b"BZh")  # bzip2's magic alone: a damaged archive, skipped
    state = ds_star(question="What does the file say?", data=str(data), return_state=True)
    assert state.is_failed()
    assert "no files found" in state.message and "f\ufffd\ufffd.csv" in state.message
    APILogWorker.drain_all(timeout=30)
    flow_run_id = state.state_details.flow_run_id
    only_this_run = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
    with get_client(sync_client=True) as client:
        lines = [log.message for log in client.read_logs(log_filter=only_this_run)]
    assert any(line.startswith("failed: DataError: no files found") for line in lines), lines


def test_prompt_output_default_matches_the_setting() -> None:
    from dsstar.settings import Settings

    assert Settings().max_output_chars == agents.PROMPT_OUTPUT_CHARS
