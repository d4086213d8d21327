"""The run ledger on SQLite and on PostgreSQL: migrations, writes, history, reuse lookups."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest
import sqlalchemy
from scenarios import ANSWER, two_rounds

from dsstar.errors import LedgerError
from dsstar.records.ledger import Ledger, question_key

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
STORE = "/srv/dsstar"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    url = request.getfixturevalue("postgres_url")
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:  # every test starts from an empty schema
        connection.execute(sqlalchemy.text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    from dsstar.records import ledger

    ledger._engine.cache_clear()
    return url


def record(run_id: str, answer: str | None, status: str = "verified", **extra) -> dict:
    return {
        "run_id": run_id, "question": QUESTION, "guidelines": "", "data": "/lake",
        "status": status, "answer": answer, "plan": ["load", "join"], "solution": "print(1)",
        "started_at": f"2026-11-{10 + int(run_id[-1]):02d}T02:00:00+00:00",
        "finished_at": f"2026-11-{10 + int(run_id[-1]):02d}T02:05:00+00:00", **extra,
    }  # fmt: skip


ROUND = {"round": 0, "step": "load", "route": None, "verdict": True, "execution_ok": True,
         "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.001, "seconds": 1.5}  # fmt: skip
CALL = {"agent": "planner", "label": "planner r00", "model": "m", "input_tokens": 10,
        "output_tokens": 5, "cost_usd": 0.001, "latency_s": 0.3}  # fmt: skip


def test_schema_is_migrated_once_and_versioned(database_url):
    Ledger(database_url, STORE)
    from dsstar.records import ledger

    ledger._engine.cache_clear()
    Ledger(database_url, STORE)  # a second open finds the schema current
    engine = sqlalchemy.create_engine(database_url)
    with engine.connect() as connection:
        version = connection.execute(
            sqlalchemy.text("SELECT version_num FROM dsstar_alembic_version")
        )
        assert [row[0] for row in version] == ["0003"]
        tables = set(sqlalchemy.inspect(connection).get_table_names())
    assert {"dsstar_run", "dsstar_round", "dsstar_llm_call", "dsstar_answer"} <= tables
    # A process that opens a current ledger does not import Alembic (a run's start-up).
    opened = subprocess.run(
        [sys.executable, "-c", "import sys; from dsstar.records.ledger import Ledger;"
         f" Ledger({database_url!r}, {STORE!r}); print('alembic' in sys.modules)"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (opened.returncode, opened.stdout.strip()) == (0, "False"), opened.stderr


def test_the_head_revision_dsstar_knows_is_alembics():
    """A ledger at `HEAD` is opened without Alembic: HEAD must be the newest migration."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from dsstar.records import ledger, migrations

    config = Config()
    config.set_main_option("script_location", str(ledger.MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == migrations.HEAD


def test_a_ledger_upgraded_by_a_newer_release_is_refused_with_a_clear_error(database_url):
    """Older workers left running beside newer ones across an upgrade (docs/beyond.md)."""
    Ledger(database_url, STORE)
    from dsstar.records import ledger

    ledger._engine.cache_clear()
    engine = sqlalchemy.create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text("UPDATE dsstar_alembic_version SET version_num='0099'"))
    engine.dispose()
    with pytest.raises(LedgerError, match="schema is newer than this dsstar.*'0099'"):
        Ledger(database_url, STORE)


def test_calls_keep_their_cached_tokens(database_url):
    ledger = Ledger(database_url, STORE)
    ledger.record(record("run-9", "42"), [ROUND], [CALL | {"cached_tokens": 1024}, CALL])
    assert sorted(c.cached_tokens for c in ledger.calls("run-9")) == [0, 1024]


def _open_at_once(url: str, barrier, results) -> None:
    from dsstar.records import ledger

    ledger._engine.cache_clear()  # a forked child opens its own engine, as a new process does
    barrier.wait()
    try:
        Ledger(url, STORE)
        results.put("ok")
    except Exception as exc:  # the parent reports what each process met
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_ledger_at_once_all_find_one_schema(database_url):
    """Nightly runs started together share a ledger that does not exist yet: each of them
    opens it, and none fails on a table another one is creating."""
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(6), context.Queue()
    workers = [
        context.Process(target=_open_at_once, args=(database_url, barrier, results))
        for _ in range(6)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [results.get(timeout=5) for _ in workers] == ["ok"] * 6
    engine = sqlalchemy.create_engine(database_url)
    with engine.connect() as connection:
        versions = connection.execute(sqlalchemy.text("SELECT * FROM dsstar_alembic_version"))
        assert [row[0] for row in versions] == ["0003"]


def test_records_history_and_reuse_lookup(database_url):
    ledger = Ledger(database_url, STORE)
    ledger.record(record("run-1", "42"), [ROUND], [CALL, CALL])
    ledger.record(record("run-2", "43", reused_solution=True), [ROUND], [CALL])
    ledger.record(record("run-3", None, status="failed", error="boom"), [], [CALL])
    ledger.record(record("run-2", "44"), [ROUND, ROUND | {"round": 1}], [CALL])  # a re-record

    key = question_key(QUESTION)
    assert [(r.run_id, r.answer, r.status) for r in ledger.history(key)] == [
        ("run-1", "42", "verified"), ("run-2", "44", "verified"), ("run-3", None, "failed"),
    ]  # fmt: skip
    assert (
        question_key("  which REGION had the highest revenue in 2024 H1, and who manages it? ")
        == key
    )
    assert question_key(QUESTION, "two decimals") != key
    assert ledger.last_verified(key, "/lake").run_id == "run-2"
    assert ledger.last_verified(key, "/other-lake") is None
    assert len(ledger.rounds("run-2")) == 2 and len(ledger.calls("run-1")) == 2
    engine = sqlalchemy.create_engine(database_url)
    with engine.connect() as connection:
        answers = connection.execute(sqlalchemy.text("SELECT run_id, answer FROM dsstar_answer"))
        assert sorted(answers) == [("run-1", "42"), ("run-2", "44")]


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite: test_flow_e2e
def test_a_run_writes_its_ledger_rows(database_url, env, llm, sales, monkeypatch):
    from flows.ds_star import ds_star

    monkeypatch.setenv("DSSTAR_DATABASE_URL", database_url)
    two_rounds(llm)
    result = ds_star(question=QUESTION, data=str(sales), run_id="ledger-run")
    ledger = Ledger(database_url, env["DSSTAR_STORAGE"])
    [row] = ledger.history(question_key(QUESTION))
    assert (row.run_id, row.status, row.answer, row.rounds) == ("ledger-run", "verified", ANSWER, 2)
    assert row.llm_calls == result["llm_calls"] == len(ledger.calls("ledger-run"))
    assert row.input_tokens == result["input_tokens"]
    assert [r.verdict for r in ledger.rounds("ledger-run")] == [False, True]


def test_a_ledger_shows_each_storage_its_own_runs_and_reuse(database_url):
    """One ledger (the default one of a user, or a shared one) records two storages: each
    sees only its own history, and reuse never finds the other's solution."""
    here, there = Ledger(database_url, STORE), Ledger(database_url, "s3://bucket/other/")
    here.record(record("run-1", "42"), [ROUND], [CALL])
    there.record(record("run-2", "43"), [ROUND], [CALL])
    key = question_key(QUESTION)
    assert [r.run_id for r in here.history(key)] == ["run-1"]
    assert [r.run_id for r in there.history(key)] == ["run-2"]
    assert here.last_verified(key, "/lake").run_id == "run-1"
    assert there.last_verified(key, "/lake").run_id == "run-2"
    assert Ledger(database_url, "/srv/elsewhere").last_verified(key, "/lake") is None


def test_the_migration_keeps_rows_and_reads_their_storage(database_url):
    """A ledger written before runs named their storage keeps every row; each row's
    storage is read from its artifacts URI, so its history and reuse stay with it."""
    from alembic import command
    from alembic.config import Config

    from dsstar.records import ledger as module

    engine = sqlalchemy.create_engine(database_url)
    config = Config()
    config.set_main_option("script_location", str(module.MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
        for run_id, uri in (("old-1", f"{STORE}/runs/old-1"), ("old-2", None)):
            connection.execute(
                sqlalchemy.text(
                    "INSERT INTO dsstar_run (run_id, question, question_key, guidelines, data,"
                    " status, answer, solution, reused_solution, rounds, llm_calls,"
                    " input_tokens, output_tokens, finished_at, artifacts_uri) VALUES (:id, :q,"
                    " :k, '', '/lake', 'verified', '42', 'print(42)', false, 1, 3, 0, 0,"
                    " '2026-11-01 02:00:00', :uri)"
                ),
                {"id": run_id, "q": QUESTION, "k": question_key(QUESTION), "uri": uri},
            )
    engine.dispose()
    module._engine.cache_clear()
    ledger = Ledger(database_url, STORE)  # opening migrates to the newest schema
    key = question_key(QUESTION)
    assert [r.run_id for r in ledger.history(key)] == ["old-1"]
    assert ledger.last_verified(key, "/lake").run_id == "old-1"
    with engine.connect() as connection:
        rows = connection.execute(sqlalchemy.text("SELECT run_id, storage FROM dsstar_run"))
        assert sorted(rows) == [("old-1", STORE), ("old-2", None)]
