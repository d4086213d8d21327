"""`dsstar.ask` in a notebook or a script prints nothing and logs nothing unless asked
(`verbose=True`, or a logging level), while the run's lines still reach the Prefect API; and no
line offers a link to a UI that is not there: the temporary server of a one-off run has none."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from prefect import get_client
from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
from scenarios import ANSWER, always_first_time

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"

# A user's script. With `handler`, it first puts a handler on the root logger at DEBUG (as
# logging.basicConfig does) and prints, after the answer, the records of dsstar and Prefect
# that reached it.
SCRIPT = """
import json, logging, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.name.split(".")[0] in ("prefect", "dsstar", "flows", "tasks"):
            records.append(record.name + ": " + record.getMessage())
if HANDLER:
    logging.getLogger().addHandler(Keep())
    logging.getLogger().setLevel(logging.DEBUG)
import dsstar
answer = dsstar.ask(QUESTION, DATA, **OPTIONS)
print(json.dumps({"answer": answer.answer, "flow_run_id": answer.flow_run_id}))
print("".join("LOGGED " + r + "\\n" for r in records), end="")
"""


def ask(sales, *, server=False, handler=False, **options):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    if not server:  # a one-off run: the temporary server of this process
        env.pop("PREFECT_API_URL", None)
    given = f"QUESTION, DATA, OPTIONS, HANDLER = {QUESTION!r}, {str(sales)!r}, {options!r}, "
    code = given + f"{handler!r}\n" + SCRIPT
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    assert json.loads(first)["answer"] == ANSWER
    return json.loads(first), rest, done.stderr


def test_ask_prints_nothing_by_default(env, llm, sales):
    always_first_time(llm)
    _, printed, stderr = ask(sales)
    assert printed == [] and stderr == ""


def test_ask_logs_nothing_to_a_users_handlers_yet_the_api_has_the_runs_lines(env, llm, sales):
    always_first_time(llm)
    answer, logged, stderr = ask(sales, server=True, handler=True)
    assert logged == [] and stderr == ""
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=[answer["flow_run_id"]]))
        )
    assert f"answer (verified, 1 rounds): {ANSWER}" in [log.message for log in logs]


def test_verbose_shows_the_runs_story_without_a_link_to_a_missing_ui(env, llm, sales):
    always_first_time(llm)
    _, printed, stderr = ask(sales, verbose=True)
    assert f"answer (verified, 1 rounds): {ANSWER}" in stderr
    assert "View at" not in stderr and "/runs/flow-run/" not in stderr  # no UI to see


def test_a_logging_level_shows_that_level_and_above(env, llm, sales):
    always_first_time(llm)
    _, printed, stderr = ask(sales, verbose=30, handler=True)  # logging.WARNING
    assert printed == [] and stderr == ""  # a run without warnings says nothing
