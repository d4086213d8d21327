"""The Python API refuses what the CLI has no flag for: every public function of `dsstar`
and `dsstar.api` refuses a secret, the worker's policy and a URL with a password in it, by
name, with the variable that sets it; and nothing secret ever reaches a flow run's
parameters in Prefect (read back through its API) or a run's stored record."""

from __future__ import annotations

import inspect
import json
import os

import pytest
from prefect import get_client
from scenarios import ANSWER, two_rounds

import dsstar
from dsstar import api
from dsstar.errors import UsageError
from dsstar.storage import Store

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
API_KEY = "sk-api-secret-7f3c1e"
DB_PASSWORD = "pg-password-2b9d4a"

# Each public function, called with `kept` as its settings (data is the test's folder).
CALLS = {
    "dsstar.ask": lambda data, kept: dsstar.ask(QUESTION, data, **kept),
    "dsstar.describe": lambda data, kept: dsstar.describe(data, **kept),
    "dsstar.describe offline": lambda data, kept: dsstar.describe(data, offline=True, **kept),
    "dsstar.runs": lambda data, kept: dsstar.runs(**kept),
    "api.file_descriptions": lambda data, kept: api.file_descriptions(str(data), **kept),
    "api.prepare_run": lambda data, kept: api.prepare_run(
        question=QUESTION, data=str(data), **kept
    ),  # fmt: skip
    "dsstar.report": lambda data, kept: dsstar.report(QUESTION, data, **kept),
    "api.prepare_report": lambda data, kept: api.prepare_report(
        question=QUESTION, data=str(data), **kept
    ),  # fmt: skip
}
KEPT = {
    "api_key": ("sk-never-recorded", "DSSTAR_API_KEY"),
    "database_url": (f"postgresql+psycopg://u:{DB_PASSWORD}@db/x", "DSSTAR_DATABASE_URL"),
    "form_allow": (["*"], "DSSTAR_FORM_ALLOW"),
    "data_roots": (["/"], "DSSTAR_DATA_ROOTS"),
    "script_python": ("/usr/bin/python3", "DSSTAR_SCRIPT_PYTHON"),
    "api_base": (f"https://user:{DB_PASSWORD}@gateway.example/v1", "holds a password"),
    "storage": (f"s3://AKIAX:{DB_PASSWORD}@bucket/runs", "holds a password"),
}


def flow_run_parameters() -> dict[str, dict]:
    """Every flow run the test server holds: its id and the parameters Prefect recorded."""
    with get_client(sync_client=True) as client:
        return {str(r.id): r.parameters for r in client.read_flow_runs(limit=200)}


def test_the_table_holds_every_public_function():
    called = {c.split()[0].split(".")[1] for c in CALLS}
    functions = {n for n in api.__all__ if inspect.isfunction(getattr(api, n))}
    assert functions == called | {"run_prepared"}  # it takes a PreparedRun, no settings
    assert {n for n in dsstar.__all__ if inspect.isfunction(getattr(dsstar, n))} <= called


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("name", KEPT)
def test_a_secret_or_the_worker_policy_is_refused_by_name(env, sales, call, name):
    value, told = KEPT[name]
    before = set(flow_run_parameters())
    with pytest.raises(UsageError) as refused:
        CALLS[call](sales, {name: value})
    said = str(refused.value)
    assert said.startswith(f"{name} ") and "cannot be given here" in said and told in said
    assert DB_PASSWORD not in said and "sk-never-recorded" not in said  # masked, not echoed
    assert set(flow_run_parameters()) == before  # refused before any flow run was created


@pytest.mark.slow
def test_no_secret_reaches_a_flow_runs_parameters(env, llm, sales, s3, postgres_url, monkeypatch):
    """With the key, a ledger URL with a password and AWS credentials in the environment,
    and S3 storage, each public function runs; Prefect's records of its flow runs and the
    run's stored record hold none of them."""
    database_url = postgres_url.replace("postgres@", f"postgres:{DB_PASSWORD}@")
    monkeypatch.setenv("DSSTAR_API_KEY", API_KEY)
    monkeypatch.setenv("DSSTAR_DATABASE_URL", database_url)
    secrets = [API_KEY, DB_PASSWORD, database_url, os.environ["AWS_SECRET_ACCESS_KEY"]]
    llm.require_key(API_KEY)  # the secrets are the ones in use
    two_rounds(llm)
    before = set(flow_run_parameters())

    described = dsstar.describe(sales, max_parallel=2)  # the analyzer: a describe flow run
    assert {f.path for f in described} >= {"orders_2024.csv", "regions.json"}
    answer = dsstar.ask(QUESTION, sales, max_rounds=5)
    assert answer.answer == ANSWER
    assert answer.run_id in [r.run_id for r in dsstar.runs()]
    assert dsstar.describe(sales, offline=True)

    recorded = {k: v for k, v in flow_run_parameters().items() if k not in before}
    assert len(recorded) == 2  # ds-star-describe and ds-star
    text = json.dumps(recorded)
    assert str(sales) in text and QUESTION in text  # what the runs were given is there
    stored = Store(s3).read_text(f"runs/{answer.run_id}/run.json")
    for secret in secrets:
        assert secret not in text and secret not in stored
