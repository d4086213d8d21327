"""Alerts of the nightly questions, end to end: `dsstar serve --notify` on a Prefect server
of its own (its triggers and actions services on), a Custom Webhook notification block that
posts to a receiver on loopback, and nightly batches run through the deployment. An answer
that changed, a question that failed and a file that broke its contract each reach the
receiver exactly once, with the question, the answers or the error, the failed expectation
and a link to the question's flow run in the UI; a night without news sends nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import forked_cli
import pytest
from conftest import (
    EXAMPLE,
    REPO,
    _free_port,
    create_database,
    prefect_api,
    start_prefect_server,
)
from fake_llm import Error, FakeLLM, text_of
from prefect import get_client
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
from prefect.deployments import run_deployment
from processes import stop
from scenarios import ANSWER, always_first_time

from flows.alerts import ALERT_NAMES, QUESTION_TAG

pytestmark = pytest.mark.slow

REVENUE = "Which region had the highest revenue in 2024 H1, and who manages it?"
UNITS = "How many units of Gizmo were sold in 2024 H1, by region?"
TOO_LONG = (  # what an OpenAI-compatible server answers when a prompt does not fit
    "This model's maximum context length is 8192 tokens. However, your messages resulted in"
    " 9120 tokens. Please reduce the length of the messages."
)


class Receiver:
    """A webhook endpoint on 127.0.0.1: every POSTed JSON body is kept, in order."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def about(self, kind: str) -> list[dict[str, Any]]:
        """The messages whose subject starts with `dsstar: <kind>`."""
        return [m for m in self.received if m["subject"].startswith(f"dsstar: {kind}")]


def wait_for(check: Callable[[], bool], what: str, deadline_s: float = 180) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.5)


def fields(message: dict[str, Any]) -> dict[str, str]:
    """A message body's `Name: value` lines, by name; the lines below a `Name:` line that
    are not themselves one belong to it."""
    found: dict[str, str] = {}
    name = ""
    for line in message["body"].splitlines()[1:]:
        head = re.match(r"([A-Z][a-z ]*):(?: |$)", line)
        if head:
            name = head.group(1)
            found[name] = line[head.end() :]
        elif name:
            found[name] = (found[name] + "\n" + line).lstrip("\n")
    return found


@pytest.fixture(scope="module")
def alerting(tmp_path_factory, postgres_url):
    """A Prefect server whose triggers and actions services run, on PostgreSQL as
    docs/alerts.md asks (on SQLite under load it may send an alert more than once), a
    notification block on it that posts to a receiver, and `dsstar serve` with one fake
    model server."""
    root = tmp_path_factory.mktemp("alerts")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    home = Path(tempfile.mkdtemp(prefix="dsstar-alerts-prefect-"))
    server_env = os.environ | {
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_API_DATABASE_CONNECTION_URL": create_database(
            postgres_url, "prefect_alerts", driver="asyncpg"
        ),
        # On by default; said here because the alerts need them.
        "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
        "PREFECT_SERVER_SERVICES_ACTIONS_ENABLED": "true",
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "true",
    }
    server = start_prefect_server(server_env, port, root / "server.log")
    receiver = Receiver()
    llm = FakeLLM().start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    env.update(
        PREFECT_API_URL=api,
        PREFECT_HOME=str(home),
        DSSTAR_MODEL="openai/gpt-4o-mini",
        DSSTAR_API_BASE=llm.base_url,
        DSSTAR_API_KEY="sk-test-not-secret",
        DSSTAR_STORAGE=str(root / "storage"),
        DSSTAR_DATABASE_URL=f"sqlite:///{root / 'ledger.db'}",
        DSSTAR_WORK_DIR=str(root),
        DSSTAR_LLM_RETRY_DELAY="0.05",
        DSSTAR_DATA_ROOTS=str(root),
        PREFECT_RUNNER_POLL_FREQUENCY="1",
    )
    try:
        with prefect_api(api):
            CustomWebhookNotificationBlock(
                name="dsstar alerts",
                url=receiver.url,
                json_data={"subject": "{{subject}}", "body": "{{body}}"},
            ).save("team-hook")
            yield SimpleNamespace(
                root=root, env=env, llm=llm, receiver=receiver, ui=f"http://127.0.0.1:{port}",
                start_serve=lambda *args: _start_serve(root, env, args),
            )  # fmt: skip
    finally:
        for proc in _SERVES:
            stop(proc)
        _SERVES.clear()
        llm.stop()
        receiver.server.shutdown()
        stop(server)
        shutil.rmtree(home, ignore_errors=True)


_SERVES: list[subprocess.Popen] = []


def _start_serve(root: Path, env: dict[str, str], args: tuple[str, ...]) -> subprocess.Popen:
    log = open(root / f"serve-{len(_SERVES)}.log", "w")
    proc = forked_cli.start(
        [sys.executable, "-m", "dsstar", "serve", *args],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    _SERVES.append(proc)
    return proc


def dsstar(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def automations_named(name: str) -> list[Any]:
    with get_client(sync_client=True) as client:
        return client.read_automations_by_name(name)


def night(root: Path, name: str, questions: list[tuple[str, Path]]):
    """One nightly batch of `questions` through the served deployment; its flow run."""
    path = root / f"{name}.yaml"
    path.write_text("".join(f"- question: {q}\n  data: {data}\n" for q, data in questions))
    return run_deployment(
        "ds-star-nightly/nightly",
        parameters={"questions_file": str(path)},
        timeout=300,
        poll_interval=1,
    )


def question_runs(question: str) -> list[Any]:
    """The flow runs of a nightly question, oldest first."""
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[QUESTION_TAG]))
        )
    runs = [r for r in runs if r.parameters.get("question") == question]
    return sorted(runs, key=lambda r: r.start_time or r.created)


def test_notify_refuses_a_block_that_does_not_exist_and_a_temporary_server(alerting):
    refused = dsstar(alerting.env, "serve", "--notify", "custom-webhook/nobody-home")
    assert refused.returncode == 2, refused.stderr
    assert "--notify custom-webhook/nobody-home: no notification block" in refused.stderr
    assert "custom-webhook/team-hook" in refused.stderr  # what does exist
    assert not automations_named(ALERT_NAMES[0])
    # Without a lasting server there is no block to find, and nowhere to keep automations.
    alone = {k: v for k, v in alerting.env.items() if k != "PREFECT_API_URL"}
    refused = dsstar(alone, "alerts", "--notify", "custom-webhook/team-hook")
    assert refused.returncode == 2, refused.stderr
    assert "--notify needs a Prefect server that lasts" in refused.stderr


# Three nightly batches, each a flow run of its own with its question runs, on 2 cores shared
# with the rest of the suite: at a load average of 10 to 16 they took more than the suite's
# 300 s per test and the test was cut during the third night.
@pytest.mark.timeout(900)
def test_changed_answer_failed_question_and_broken_contract_alert_once_each(alerting):
    llm, receiver, root = alerting.llm, alerting.receiver, alerting.root
    # Set up three times (twice by `dsstar alerts`, once by serve): one automation per kind.
    for _ in range(2):
        done = dsstar(alerting.env, "alerts", "--notify", "team-hook")
        assert done.returncode == 0, done.stderr
    proc = alerting.start_serve("--notify", "custom-webhook/team-hook")
    with get_client(sync_client=True) as client:
        wait_for(lambda: _deployed(client, proc), "dsstar serve to register its deployments")
    for name in ALERT_NAMES:
        [automation] = automations_named(name)
        assert len(automation.actions) == 1, automation.actions

    sales, other = root / "sales", root / "other"
    shutil.copytree(EXAMPLE, sales)
    shutil.copytree(EXAMPLE, other)
    always_first_time(llm)  # the scripts compute the answer from the data

    first = night(root, "first", [(REVENUE, sales)])
    assert first.state.is_completed(), first.state
    assert receiver.received == []  # a first answer is no news

    # Overnight, one row's units jump far out of their range (the contract breaks) and make
    # the Southwest the top region (the answer changes); a second question cannot be asked.
    orders = sales / "orders_2024.csv"
    orders.write_text(orders.read_text().replace(",SW,Gadget,3,", ",SW,Gadget,3000,"))
    llm.intercept(
        lambda req: (
            Error(400, TOO_LONG) if req["agent"] == "planner" and UNITS in text_of(req) else None
        )
    )
    second = night(root, "second", [(REVENUE, sales), (UNITS, other)])
    assert second.state.is_failed() and "1 of 2 questions failed" in second.state.message

    wait_for(lambda: len(receiver.received) >= 3, "three alerts")
    llm.intercept(None)
    # A night without news: the unit question answered for the first time.
    third = night(root, "third", [(UNITS, other)])
    assert third.state.is_completed(), third.state

    changed, failed, broken = (
        receiver.about(kind)
        for kind in ("nightly answer changed", "nightly question failed", "data contract broken")
    )
    assert (len(changed), len(failed), len(broken), len(receiver.received)) == (1, 1, 1, 3), (
        receiver.received
    )
    revenue_run = question_runs(REVENUE)[-1]
    units_run = question_runs(UNITS)[0]  # the failed one, before the third night's

    message = fields(changed[0])
    assert REVENUE in changed[0]["subject"]
    assert message["Question"] == REVENUE
    assert message["Data"] == str(sales)
    assert message["Before"] == ANSWER
    assert message["Now"] == "Southwest, Luis Ortega"
    assert message["Run"] == f"{alerting.ui}/runs/flow-run/{revenue_run.id}"

    message = fields(failed[0])
    assert UNITS in failed[0]["subject"]
    assert message["Question"] == UNITS
    assert message["Data"] == str(other)
    assert "maximum context length is 8192 tokens" in message["Error"]
    assert message["Run"] == f"{alerting.ui}/runs/flow-run/{units_run.id}"
    assert units_run.state.is_failed()

    message = fields(broken[0])
    assert "orders_2024.csv" in broken[0]["subject"]
    assert message["File"] == "orders_2024.csv"
    assert message["Data"] == str(sales)
    assert message["Contract"].endswith(".json") and "contracts/" in message["Contract"]
    assert "expect_column_values_to_be_between(column=units" in message["Failed expectations"]
    assert "3000" in message["Failed expectations"]  # the value observed
    assert message["Questions"] == REVENUE
    assert message["Run"] == f"{alerting.ui}/runs/flow-run/{revenue_run.id}"


def _deployed(client: Any, proc: subprocess.Popen) -> bool:
    assert proc.poll() is None, "dsstar serve exited"
    try:
        client.read_deployment_by_name("ds-star-nightly/nightly")
    except Exception:  # not registered yet
        return False
    return True
