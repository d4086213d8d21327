"""The DS-STAR flow end to end: a real Prefect server, the real sandbox, and litellm over HTTP
to a scripted model server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import EXAMPLE, dsstar_settings
from fake_llm import Error, FakeLLM, text_of
from scenarios import (
    ANSWER,
    FINAL_ONLY_ANSWER,
    JOIN,
    backtrack,
    describe_script,
    fence,
    two_rounds,
)

from dsstar.algorithm.spec import RunSpec
from dsstar.errors import LLMFatalError
from dsstar.model.ceiling import Ceiling
from dsstar.records.ledger import Ledger, question_key
from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def stored(env: dict, run_id: str) -> Path:
    return Path(env["DSSTAR_STORAGE"]) / "runs" / run_id


def layout(env: dict, run_id: str) -> set[str]:
    root = stored(env, run_id)
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


SECRETS = {
    "OPENAI_API_KEY": "sk-parent-openai-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-parent-secret",
    "GITHUB_TOKEN": "ghp-parent-token",
}
# The coder's scripts print their environment first: what generated code can see.
DUMP = "import os\nfor k, v in sorted(os.environ.items()):\n    print(k, '=', v)\n"
NOISY = "import sys, warnings\nwarnings.warn('old API')\nprint('note', file=sys.stderr)\n"


@pytest.fixture(scope="module")
def two_round(prefect_server, tmp_path_factory):
    """One two-round run that the tests below read, each for its own contract. Around the
    plain two_rounds scenario: secrets in the parent's environment, scripts that print their
    environment, a finalyzer that also warns and writes to stderr, and a person's "stop"
    stored for round 00 while the run does not ask a human."""
    root = tmp_path_factory.mktemp("two-round")
    sales = root / "sales"
    shutil.copytree(EXAMPLE, sales)
    run_id = "t-two-rounds"
    with FakeLLM() as llm, pytest.MonkeyPatch.context() as patch:
        env = {
            **dsstar_settings(llm, root),
            "DSSTAR_EXEC_TIMEOUT": "60",
            "DSSTAR_DATA_ROOTS": str(root),
        }
        for key, value in {**env, **SECRETS}.items():
            patch.setenv(key, value)
        (root / "work").mkdir()
        guidance = stored(env, run_id) / "rounds" / "00" / "guidance.json"
        guidance.parent.mkdir(parents=True)
        guidance.write_text(json.dumps({"choice": "stop", "text": "", "timed_out": False}))
        llm.script("finalyzer", fence(NOISY + FINAL_ONLY_ANSWER))  # ahead of two_rounds' reply
        two_rounds(llm, prelude=DUMP)
        result = ds_star(question=QUESTION, data=str(sales), run_id=run_id)
    return SimpleNamespace(env=env, llm=llm, result=result, run_id=run_id)


def test_two_round_success_stores_the_whole_layout(two_round):
    env, llm, result, run_id = two_round.env, two_round.llm, two_round.result, two_round.run_id
    assert result["status"] == "verified"
    assert result["answer"] == ANSWER
    assert result["rounds"] == 2
    assert len(result["plan"]) == 2
    assert result["llm_calls"] == len(llm.requests)
    assert result["input_tokens"] > 0 and result["cost_usd"] > 0
    files = layout(env, run_id)
    for name in ("run.json", "final/solution.py", "final/answer.json", "final/notebook.ipynb"):
        assert name in files
    for nn in ("00", "01"):
        for name in ("plan.json", "code.py", "output.txt", "verdict.json"):
            assert f"rounds/{nn}/{name}" in files
    assert "rounds/01/route.json" in files and "rounds/00/route.json" not in files
    for data_file in ("orders_2024.csv", "regions.json", "README.md"):
        assert f"analysis/{data_file}/script.py" in files
        assert f"analysis/{data_file}/output.txt" in files
    run = json.loads((stored(env, run_id) / "run.json").read_text())
    assert run["status"] == "verified" and run["answer"] == ANSWER
    assert "sk-test-not-secret" not in (stored(env, run_id) / "run.json").read_text()
    spec = RunSpec.from_dict(run["spec"])  # the spec the run ran under, kept with it
    assert (spec.run_id, spec.limits.timeout_s, spec.ceiling) == (run_id, 60, Ceiling())


def test_requests_carry_attribution_and_the_right_context(two_round):
    llm = two_round.llm
    assert {r["run"] for r in llm.requests} == {two_round.run_id}
    assert all(r["agent"] for r in llm.requests)
    verifier = text_of(llm.calls("verifier")[0])
    assert "orders.groupby" in verifier  # the code...
    assert "revenue by region:" in verifier and "207.0" in verifier  # ...and its output
    next_planner = text_of(llm.calls("planner")[1])
    assert "207.0" in next_planner  # the last execution result
    next_coder = text_of(llm.calls("coder")[1])
    assert 'orders = pd.read_csv("data/orders_2024.csv")' in next_coder  # the base code
    assert "data/regions.json" in next_coder  # and the file descriptions


def test_the_runs_ledger_rows_on_sqlite(two_round):
    """The run's rows in the default SQLite ledger (test_ledger runs one on PostgreSQL)."""
    env, result, run_id = two_round.env, two_round.result, two_round.run_id
    assert env["DSSTAR_DATABASE_URL"].startswith("sqlite:///")
    ledger = Ledger(env["DSSTAR_DATABASE_URL"], env["DSSTAR_STORAGE"])
    [row] = ledger.history(question_key(QUESTION))
    assert (row.run_id, row.status, row.answer, row.rounds) == (run_id, "verified", ANSWER, 2)
    assert row.llm_calls == result["llm_calls"] == len(ledger.calls(run_id))
    assert row.input_tokens == result["input_tokens"]
    assert [r.verdict for r in ledger.rounds(run_id)] == [False, True]


def test_answer_is_the_final_scripts_stdout_only(two_round):
    """The finalyzer's script warns and writes to stderr: neither is part of the answer."""
    assert two_round.result["answer"] == ANSWER
    final_output = stored(two_round.env, two_round.run_id) / "final/answer.json"
    assert json.loads(final_output.read_text())["answer"] == ANSWER


def test_without_ask_human_stored_guidance_is_ignored(two_round):
    """A "stop" is stored for round 00, but the run does not ask a human: it goes on."""
    assert (stored(two_round.env, two_round.run_id) / "rounds/00/guidance.json").exists()
    assert two_round.result["status"] == "verified" and two_round.result["rounds"] == 2


def test_generated_code_sees_no_secrets(two_round):
    env = two_round.env
    output = (stored(env, two_round.run_id) / "rounds/00/output.txt").read_text()
    assert "PATH =" in output  # the script did print its environment
    for leaked in [*SECRETS.values(), "sk-test-not-secret", env["DSSTAR_API_BASE"]]:
        assert leaked not in output
    assert "DSSTAR_" not in output


def test_backtrack_drops_the_wrong_step_and_restores_its_base_code(env, llm, sales):
    backtrack(llm)
    result = ds_star(question=QUESTION, data=str(sales), run_id="t-backtrack")

    assert result["status"] == "verified"
    assert result["rounds"] == 3
    assert result["plan"] == [
        "Load the orders and compute revenue per region.",
        "Join the best region with regions.json to find its manager.",
    ]
    round_two_coder = text_of(llm.calls("coder")[2])
    assert 'orders = pd.read_csv("data/orders_2024.csv")' in round_two_coder
    assert "WRONG_STEP_MARKER" not in round_two_coder
    assert "Average the unit prices" not in round_two_coder
    route = json.loads((stored(env, "t-backtrack") / "rounds/02/route.json").read_text())
    assert route["decision"] == "Step 2"


def test_max_rounds_still_finalizes(env, llm, sales):
    from scenarios import never_satisfied

    never_satisfied(llm)
    result = ds_star(question=QUESTION, data=str(sales), max_rounds=3, run_id="t-max")

    assert result["status"] == "max_rounds"
    assert result["rounds"] == 4  # round 00 and M = 3 refinements, each judged
    assert result["answer"] == ANSWER
    assert len(llm.calls("finalyzer")) == 1
    assert len(llm.calls("verifier")) == 4


def test_transient_errors_are_retried(env, llm, sales):
    llm.script("planner", Error(429, "slow down"), Error(503, "overloaded"))
    two_rounds(llm)  # queued after the two failures
    result = ds_star(question=QUESTION, data=str(sales), run_id="t-retry")

    assert result["status"] == "verified"
    assert [r["status"] for r in llm.calls("planner")] == [429, 503, 200, 200]


def test_auth_error_fails_fast(env, llm, sales):
    llm.default("analyzer", lambda req: Error(401, "invalid api key"))
    with pytest.raises(LLMFatalError, match="DSSTAR_API_KEY"):
        ds_star(question=QUESTION, data=str(sales), run_id="t-auth")
    assert all(r["status"] == 401 for r in llm.requests)
    assert len(llm.requests) == len(list(sales.iterdir()))  # one per file, no retries
    run = json.loads((stored(env, "t-auth") / "run.json").read_text())
    assert run["status"] == "failed" and "DSSTAR_API_KEY" in run["error"]


def test_failing_analyzer_script_is_repaired_from_the_traceback(env, llm, sales):
    two_rounds(llm)
    broken = fence("import pandas as pd\nprint(pd.read_csv('data/orders.csv').dtypes)")
    fixed = fence("import pandas as pd\nprint(pd.read_csv('data/orders_2024.csv').dtypes)")

    def analyzer(req):
        return broken if "orders_2024.csv" in text_of(req) else describe_script(req)

    llm.default("analyzer", analyzer)
    llm.script("debugger", fixed)
    ds_star(question=QUESTION, data=str(sales), run_id="t-repair")

    debug_request = text_of(llm.calls("debugger")[0])
    assert "FileNotFoundError" in debug_request
    assert "regions.json" not in debug_request  # the analyzer variant sees the traceback only
    folder = stored(env, "t-repair") / "analysis/orders_2024.csv"
    assert "unit_price" in (folder / "output.txt").read_text()
    attempts = json.loads((folder / "attempts.json").read_text())
    assert attempts["source"] == "analyzer"
    assert [a["ok"] for a in attempts["attempts"]] == [False, True]
    assert "orders_2024.csv" in (folder / "script.py").read_text()


def test_step_one_wrong_restarts_the_plan(env, llm, sales):
    llm.default("analyzer", describe_script)
    llm.script("planner", "Average the unit prices.", "Compute revenue per region with managers.")
    llm.script("coder", fence("print('unit prices')"), fence(JOIN))
    llm.script("verifier", "No", "Yes")
    llm.script("router", "Step 1 is wrong!")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER))
    result = ds_star(question=QUESTION, data=str(sales), run_id="t-restart")

    assert result["status"] == "verified" and result["rounds"] == 2
    assert result["plan"] == ["Compute revenue per region with managers."]
    restart = text_of(llm.calls("planner")[1])
    assert "FIRST step" in restart and "Plan so far" not in restart
    # Told what was dropped and why, and planned from the last result, as in Algorithm 1.
    assert "Steps dropped as wrong" in restart and "1. Average the unit prices." in restart
    assert "Step 1 is wrong!" in restart and "unit prices" in restart
    assert "print('unit prices')" not in text_of(llm.calls("coder")[1])


def test_a_single_file_is_all_the_scripts_see(env, llm, sales):
    llm.default("analyzer", describe_script)
    llm.script("planner", "List the data folder.")
    llm.script("coder", fence("import os\nprint(sorted(os.listdir('data')))"))
    llm.script("verifier", "Yes")
    llm.script("finalyzer", fence("import os\nprint(sorted(os.listdir('data')))"))
    result = ds_star(question=QUESTION, data=str(sales / "regions.json"), run_id="t-single")
    assert result["answer"] == "['regions.json']"
