"""The commands of the README and of the docs' quickstart work as written.

Every line of a code block tagged `bash` in README.md and docs/index.md is run with bash from
the repository root, in order, against the scripted model server (other blocks, tagged `sh`,
show commands that need a real model, server or cluster). Only the set-up is left out: the
virtual environment and install at the start of the README's first line (the `dsstar demo`
that follows it is run) and `bash scripts/test`. Afterwards every object the commands stored
must match the storage layout table. That first command, `dsstar demo`, runs as a newcomer
runs it (no key): what it prints, the run it stores and what the Prefect UI shows of it are
checked here, and so is the report the quickstart's `dsstar demo --report` writes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import forked_cli
import pytest
from conftest import REPO, dsstar_settings
from scenarios import ANSWER, always_first_time

from dsstar.keys import LAYOUT

pytestmark = pytest.mark.slow

SETUP = "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.lock -e . && "
TESTS = "bash scripts/test"
PAGES = ("README.md", "docs/index.md")


def bash_commands(text: str) -> list[str]:
    """The commands of the `bash` blocks of a Markdown text, continuation lines joined."""
    commands: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(line.strip())
    return commands


def runnable(commands: list[str]) -> list[str]:
    """The commands less the set-up: the install before `dsstar demo`, the tests."""
    kept = []
    for command in commands:
        if command == TESTS:
            continue
        kept.append(command.removeprefix(SETUP))
    return kept


def test_the_readme_opens_with_the_two_set_up_commands():
    first = bash_commands((REPO / "README.md").read_text())
    assert first[0] == SETUP + ".venv/bin/dsstar demo"
    assert first[1] == TESTS


def layout_pattern(pattern: str) -> re.Pattern[str]:
    """A LAYOUT key pattern as a regex: <name> is one path segment, a trailing ... anything."""
    regex = re.escape(pattern)
    regex = re.sub(r"<[^>]+>", "[^/]+", regex.replace(r"\<", "<").replace(r"\>", ">"))
    return re.compile(regex.replace(r"\.\.\.", ".+") + r"\Z")


@pytest.mark.parametrize("page", PAGES)
def test_the_commands_work_as_written(page, llm, tmp_path):
    commands = runnable(bash_commands((REPO / page).read_text()))
    assert len(commands) >= 3, commands
    assert (REPO / ".venv" / "bin" / "dsstar").exists(), "the commands name .venv/bin/dsstar"
    always_first_time(llm)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")},
        **dsstar_settings(llm, tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    (tmp_path / "work").mkdir()
    # A newcomer's `dsstar demo`: no key, and Prefect's own log level (the suite's WARNING
    # would keep its lines from the Logs tab).
    newcomer = {k: v for k, v in env.items() if "API_KEY" not in k}
    newcomer["PREFECT_LOGGING_LEVEL"] = "INFO"
    asked, demos, reports = 0, 0, 0
    for command in commands:
        demo = bool(re.search(r"dsstar demo\b", command))
        report = demo and "--report" in command
        before = len(llm.requests)
        done = subprocess.run(
            ["bash", "-c", command], cwd=REPO, env=newcomer if demo else env,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, command
        if re.search(r"dsstar run\b", command):
            assert ANSWER in done.stdout, command
        if demo:  # answered by its recorded replies
            assert len(llm.requests) == before  # DSSTAR_API_BASE is the model: never asked
        if report:
            the_report_demo_writes_a_cited_report(done, tmp_path / "storage")
            reports += 1
        elif demo:
            the_demo_answers_and_says_where_to_look(done, tmp_path / "storage")
            demos += 1
        if re.search(r"dsstar (runs list|history)\b", command):
            assert ANSWER in done.stdout, command  # the run above is listed with its answer
        if re.search(r"dsstar (describe|retrieve)\b", command):
            assert "orders_2024.csv" in done.stdout, command
        asked += bool(re.search(r"dsstar run\b", command))
    assert asked and llm.requests  # the runs were answered by the scripted model
    assert demos == (page == "README.md")  # the README's first line
    assert reports == (page == "docs/index.md")  # the quickstart's report example

    storage = tmp_path / "storage"
    stored = [p.relative_to(storage).as_posix() for p in storage.rglob("*") if p.is_file()]
    patterns = [layout_pattern(pattern) for pattern, _ in LAYOUT]
    assert any(key.startswith("runs/") for key in stored)
    unknown = [key for key in stored if not any(p.match(key) for p in patterns)]
    assert not unknown, f"stored objects missing from dsstar.keys.LAYOUT: {unknown}"


def the_demo_answers_and_says_where_to_look(done: subprocess.CompletedProcess, storage: Path):
    """A newcomer's first command: the whole job, no model and no key; what it prints, the
    run it stores, and what the Prefect UI shows of it."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )

    from tasks.cache_keys import artifact_key

    assert "Northeast, Ada Park" in done.stdout
    assert "replies: recorded from" in done.stderr and "no model was asked" in done.stderr
    assert "runs show" in done.stderr and "Prefect UI" in done.stderr
    assert "dsstar run --data" in done.stderr  # how to ask your own question

    runs = storage / "runs"
    (run_id,) = [p.name for p in runs.iterdir()]  # the first command: the only run yet
    record = json.loads((runs / run_id / "run.json").read_text())
    assert record["status"] == "verified" and record["answer"] == "Northeast, Ada Park"
    assert record["replies"] == "recorded"
    assert Path(record["recorded_from"]) == REPO / "examples" / "sales-replies.yaml"
    assert (runs / run_id / "rounds" / "01" / "output.txt").read_text()  # run in the sandbox
    shown = forked_cli.run(
        [sys.executable, "-m", "dsstar", "runs", "show", run_id, "--storage", str(storage)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert shown.returncode == 0 and "replies: recorded, from " in shown.stdout
    assert "models: replies recorded at" in shown.stdout and "recorded//" not in shown.stdout
    assert f"sandbox: {record['sandbox']}" in shown.stdout  # the one its scripts ran in

    # The Prefect UI: the answer card and the Logs tab say so too.
    key = ArtifactFilterKey(any_=[artifact_key(f"{run_id}-answer")])
    only_this_run = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[record["flow_run_id"]]))
    with get_client(sync_client=True) as client:
        (card,) = client.read_artifacts(artifact_filter=ArtifactFilter(key=key))
        assert "**Replies: recorded**, from " in card.data  # said once, not "(recorded)"
        assert "(recorded)" not in card.data
        flow_run = client.read_flow_run(record["flow_run_id"])
        assert flow_run.state.is_completed() and "recorded-replies" in flow_run.tags
        # Every call the run made had its reply recorded, those asked beside a verdict too:
        # the UI shows no failed task.
        this_run = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id]))
        tasks = client.read_task_runs(flow_run_filter=this_run)
        assert tasks and not [t.name for t in tasks if t.state.is_failed()]
        deadline = time.monotonic() + 30  # the server stores logs in batches, a little later
        while True:
            lines = [log.message for log in client.read_logs(log_filter=only_this_run)]
            if any(line.startswith("replies: recorded, from ") for line in lines):
                break
            assert time.monotonic() < deadline, lines
            time.sleep(0.5)


def the_report_demo_writes_a_cited_report(done: subprocess.CompletedProcess, storage: Path):
    """`dsstar demo --report`, no model and no key: a report whose every citation resolves,
    its sub-questions runs of their own, report.md and report.html where it says."""
    from dsstar.research.citations import cited

    runs = storage / "runs"
    records = [json.loads(p.read_text()) for p in runs.glob("*/run.json")]
    (record,) = [r for r in records if r.get("kind") == "report"]
    assert record["status"] == "reported" and record["replies"] == "recorded"
    assert done.stdout.strip() == record["answer"].strip()  # the report, printed
    assert "runs show" in done.stderr and "report.html" in done.stderr
    subs = record["sub_runs"]
    assert len(subs) == 4 and all(s["status"] == "verified" for s in subs)
    for sub in subs:  # each a run of its own, in the sandbox
        assert (runs / sub["run_id"] / "final" / "solution.py").is_file()
    final = runs / record["run_id"] / "final"
    report = re.sub(r"\\(.)", r"\1", (final / "report.md").read_text())  # as it reads
    body, references = report.split("## References")
    for number in cited(report):  # every [N] resolves to a reference
        assert f"**[{number}]** {subs[number - 1]['question']}" in references
    assert set(cited(body)) == {s["number"] for s in subs}  # every answer cited
    page = (final / "report.html").read_text()
    assert 'src="data:image/png;base64,' in page and "<script" not in page
