"""`dsstar.ask` in a notebook or a script prints nothing and logs nothing unless asked
(`verbose=True`, or a logging level), while the run's lines still reach the Prefect API; and no
line offers a link to a UI that is not there: the temporary server of a one-off run has none."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import EXAMPLE, dsstar_settings
from fake_llm import FakeLLM
from prefect import get_client
from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
from scenarios import ANSWER, always_first_time

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"

# A user's script: each ask of ASKS in turn, in one process (as a notebook asks again). A
# `None` in ASKS puts a handler on the root logger at DEBUG (as logging.basicConfig does) before
# the asks after it. It prints each answer, then the records of dsstar and Prefect that reached
# its handler, then a line that ends that ask's part of stdout and stderr alike.
SCRIPT = """
import json, logging, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.name.split(".")[0] in ("prefect", "dsstar", "flows", "tasks"):
            records.append(record.name + ": " + record.getMessage())
for options in ASKS:
    if options is None:
        logging.getLogger().addHandler(Keep())
        logging.getLogger().setLevel(logging.DEBUG)
        continue
    import dsstar  # at the first ask: after a handler put up before it
    answer = dsstar.ask(QUESTION, DATA, **options)
    print(json.dumps({"answer": answer.answer, "flow_run_id": answer.flow_run_id}))
    print("".join("LOGGED " + r + "\\n" for r in records), end="")
    records.clear()
    print(END, flush=True)
    print(END, file=sys.stderr, flush=True)
"""
END = "-- end of this ask --"
HANDLER = None  # in ASKS: the asks after it have the user's root handler


def ask(sales, *asks: dict | None, server: bool = False) -> list[tuple[dict, list[str], str]]:
    """Each ask's (answer, the lines it printed after its answer, its stderr), from one
    process; `server=False`: a one-off process, its runs on its own temporary server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    if not server:  # a one-off run: the temporary server of this process
        env.pop("PREFECT_API_URL", None)
    given = f"QUESTION, DATA, ASKS, END = {QUESTION!r}, {str(sales)!r}, {list(asks)!r}, {END!r}\n"
    done = subprocess.run(
        [sys.executable, "-c", given + SCRIPT], capture_output=True, text=True, timeout=300,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outs, errs = done.stdout.split(END + "\n"), done.stderr.split(END + "\n")
    asked = [a for a in asks if a is not None]
    assert len(outs) == len(errs) == len(asked) + 1 and outs[-1] == errs[-1] == "", done
    told = []
    for out, err in zip(outs[:-1], errs[:-1], strict=True):
        first, *rest = out.splitlines()
        assert json.loads(first)["answer"] == ANSWER
        told.append((json.loads(first), rest, err))
    return told


@pytest.fixture(scope="module")
def one_off(tmp_path_factory):
    """One process of a user's script with no Prefect API configured and no handler of its
    own, asking twice: by default, then with `verbose=True` (whose story shows that the first
    ask gave the console back as it found it). Each ask's (answer, printed lines, stderr)."""
    tmp_path = tmp_path_factory.mktemp("one-off")
    sales = tmp_path / "sales"
    shutil.copytree(EXAMPLE, sales)
    (tmp_path / "work").mkdir()
    with FakeLLM() as llm, pytest.MonkeyPatch.context() as patch:
        for key, value in {**dsstar_settings(llm, tmp_path), "DSSTAR_EXEC_TIMEOUT": "60"}.items():
            patch.setenv(key, value)
        always_first_time(llm)
        default, verbose = ask(sales, {}, {"verbose": True})
    return {"default": default, "verbose": verbose}


def test_ask_prints_nothing_by_default(one_off):
    _, printed, stderr = one_off["default"]
    assert printed == [] and stderr == ""


def test_ask_logs_nothing_to_a_users_handlers_yet_the_api_has_the_runs_lines(env, llm, sales):
    always_first_time(llm)
    [(answer, logged, stderr)] = ask(sales, HANDLER, {}, server=True)
    assert logged == [] and stderr == ""
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=[answer["flow_run_id"]]))
        )
    assert f"answer (verified, 1 rounds): {ANSWER}" in [log.message for log in logs]


def test_verbose_shows_the_runs_story_without_a_link_to_a_missing_ui(one_off):
    _, printed, stderr = one_off["verbose"]
    assert f"answer (verified, 1 rounds): {ANSWER}" in stderr
    assert "View at" not in stderr and "/runs/flow-run/" not in stderr  # no UI to see


def test_a_logging_level_shows_that_level_and_above(env, llm, sales):
    always_first_time(llm)
    [(_, printed, stderr)] = ask(sales, HANDLER, {"verbose": 30})  # logging.WARNING
    assert printed == [] and stderr == ""  # a run without warnings says nothing
