"""The run ledger (sqlmodel): runs, rounds, LLM calls and answers, in SQLite by default or any
database SQLAlchemy reaches (`DSSTAR_DATABASE_URL`, e.g. postgresql+psycopg://...).

The schema is versioned with Alembic (`dsstar/records/migrations/`); opening a ledger
upgrades it (a ledger already at the newest revision is opened without importing Alembic).

One ledger may record runs of several storages (the default one, `~/.dsstar/ledger.db`, does
for every storage of its user; a shared `DSSTAR_DATABASE_URL` does on purpose). Every run row
names its storage, and a `Ledger` opened for a storage reads only that storage's runs: the
history a command shows and the solutions a run reuses are those of its own storage.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Column, Text, inspect, make_url
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, create_engine, delete, select

from dsstar.algorithm.verdict import ANSWERED
from dsstar.errors import LedgerError
from dsstar.records.migrations import HEAD, VERSION_TABLE
from dsstar.text import for_database

__all__ = ["AnswerRow", "CallRow", "Ledger", "RoundRow", "RunRow", "question_key"]

MIGRATIONS = Path(__file__).parent / "migrations"


def question_key(question: str, guidelines: str = "") -> str:
    """Identity of a question: case and spacing do not matter; guidelines do."""

    def norm(text: str) -> str:
        return re.sub(r"\s+", " ", text.strip().lower())

    key = f"{norm(question)}\n{norm(guidelines)}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:20]


class RunRow(SQLModel, table=True):
    __tablename__ = "dsstar_run"

    run_id: str = Field(primary_key=True)
    question: str = Field(sa_column=Column(Text, nullable=False))
    question_key: str = Field(index=True)
    guidelines: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    data: str = Field(index=True)
    storage: str | None = Field(default=None, index=True)  # the storage holding the run
    status: str
    answer: str | None = Field(default=None, sa_column=Column(Text))
    plan: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    solution: str | None = Field(default=None, sa_column=Column(Text))
    reused_solution: bool = False
    reused_from: str | None = None  # the run whose solution was reused
    rounds: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    flow_run_id: str | None = None
    artifacts_uri: str | None = None
    error: str | None = Field(default=None, sa_column=Column(Text))


class RoundRow(SQLModel, table=True):
    __tablename__ = "dsstar_round"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="dsstar_run.run_id")
    number: int
    step: str = Field(sa_column=Column(Text, nullable=False))
    route: str | None = None
    verdict: bool | None = None
    execution_ok: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0


class CallRow(SQLModel, table=True):
    __tablename__ = "dsstar_llm_call"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="dsstar_run.run_id")
    agent: str = Field(index=True)
    label: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # input tokens served from the provider's prompt cache
    cost_usd: float | None = None
    latency_s: float = 0.0


class AnswerRow(SQLModel, table=True):
    __tablename__ = "dsstar_answer"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, foreign_key="dsstar_run.run_id")
    question_key: str = Field(index=True)
    answer: str = Field(sa_column=Column(Text, nullable=False))
    answered_at: datetime


@cache
def _engine(url: str) -> Engine:
    options: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # Concurrent nightly runs share one file: wait for a lock instead of failing at once.
        options["connect_args"] = {"timeout": 30}
    try:
        engine = create_engine(url, **options)
        with engine.begin() as connection:
            _lock_schema(connection)
            if _revision(connection) != HEAD:
                _upgrade(connection, url)
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise LedgerError(f"cannot open the ledger at {_masked(url)}: {_reason(exc)}") from exc
    return engine


def _revision(connection: Connection) -> str | None:
    """The schema's revision as Alembic recorded it; None for a new ledger."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar()


def _upgrade(connection: Connection, url: str) -> None:
    from alembic import command
    from alembic.config import Config
    from alembic.util.exc import CommandError

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    try:
        command.upgrade(config, "head")
    except CommandError as exc:  # a revision this release does not know: a newer one wrote it
        raise LedgerError(
            f"cannot open the ledger at {_masked(url)}: its schema is newer than this dsstar"
            f" ({_reason(exc)}); run the release that upgraded it, or a later one"
        ) from exc


# Any fixed number: the key of the PostgreSQL advisory lock that serializes migrations.
_SCHEMA_LOCK = 0x64737374


def _lock_schema(connection: Connection) -> None:
    """Runs started together may all open a ledger that does not exist yet. The first takes
    the database's lock for the whole migration; the others wait (up to the connect timeout)
    and then find the schema current, instead of failing on a table being created."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, taken before any read
    elif connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})")


def _masked(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(an invalid database URL)"


def _reason(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


class Ledger:
    """Reads and writes the runs of `storage` (its normalized URL, as `Store.url`) in the
    ledger at `url`, migrating its schema to the latest version."""

    def __init__(self, url: str, storage: str) -> None:
        self.url = url
        self.storage = storage.rstrip("/")
        self.engine = _engine(url)

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self.engine) as session:
                yield session
        except SQLAlchemyError as exc:
            raise LedgerError(f"ledger at {_masked(self.url)}: {_reason(exc)}") from exc

    def record(self, record: dict[str, Any], rounds: list[dict], calls: list[dict]) -> None:
        """Insert or replace one run with its rounds, calls and (when there is one) answer."""
        record, rounds, calls = for_database(record), for_database(rounds), for_database(calls)
        run_id = record["run_id"]
        with self._session() as session:
            for table in (AnswerRow, CallRow, RoundRow):
                session.exec(delete(table).where(table.run_id == run_id))
            existing = session.get(RunRow, run_id)
            row = _run_row(record, self.storage)
            if existing:
                for key, value in row.model_dump().items():
                    setattr(existing, key, value)
            else:
                session.add(row)
            session.flush()
            session.add_all(_round_row(run_id, item) for item in rounds)
            session.add_all(_call_row(run_id, call) for call in calls)
            if record.get("answer") is not None and record["status"] in ANSWERED:
                session.add(
                    AnswerRow(
                        run_id=run_id,
                        question_key=row.question_key,
                        answer=record["answer"],
                        answered_at=row.finished_at or datetime.now(UTC),
                    )
                )
            session.commit()

    def last_verified(self, key: str, data: str) -> RunRow | None:
        """The newest verified run of this question over this data root, if any."""
        with self._session() as session:
            statement = (
                select(RunRow)
                .where(RunRow.storage == self.storage)
                .where(RunRow.question_key == key, RunRow.data == data)
                .where(RunRow.status == "verified", RunRow.solution.is_not(None))
                .order_by(RunRow.finished_at.desc())
            )
            return session.exec(statement).first()

    def history(self, key: str) -> list[RunRow]:
        """Every finished run of this question in this storage, oldest first."""
        with self._session() as session:
            statement = (
                select(RunRow)
                .where(RunRow.storage == self.storage)
                .where(RunRow.question_key == key, RunRow.status != "running")
                .order_by(RunRow.started_at)
            )
            return list(session.exec(statement))

    def rounds(self, run_id: str) -> list[RoundRow]:
        with self._session() as session:
            query = select(RoundRow).where(RoundRow.run_id == run_id).order_by(RoundRow.number)
            return list(session.exec(query))

    def calls(self, run_id: str) -> list[CallRow]:
        with self._session() as session:
            return list(session.exec(select(CallRow).where(CallRow.run_id == run_id)))


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _run_row(record: dict[str, Any], storage: str) -> RunRow:
    return RunRow(
        run_id=record["run_id"],
        question=record["question"],
        question_key=question_key(record["question"], record.get("guidelines") or ""),
        guidelines=record.get("guidelines") or "",
        data=record["data"],
        storage=storage,
        status=record["status"],
        answer=record.get("answer"),
        plan=record.get("plan") or [],
        solution=record.get("solution"),
        reused_solution=bool(record.get("reused_solution")),
        reused_from=record.get("reused_from"),
        rounds=record.get("rounds") or 0,
        llm_calls=record.get("llm_calls") or 0,
        input_tokens=record.get("input_tokens") or 0,
        output_tokens=record.get("output_tokens") or 0,
        cost_usd=record.get("cost_usd"),
        started_at=_time(record.get("started_at")),
        finished_at=_time(record.get("finished_at")),
        flow_run_id=record.get("flow_run_id"),
        artifacts_uri=record.get("artifacts_uri"),
        error=record.get("error"),
    )


def _round_row(run_id: str, item: dict[str, Any]) -> RoundRow:
    return RoundRow(
        run_id=run_id,
        number=item["round"],
        step=item["step"],
        route=item["route"],
        verdict=item["verdict"],
        execution_ok=item["execution_ok"],
        input_tokens=item["input_tokens"],
        output_tokens=item["output_tokens"],
        cost_usd=item["cost_usd"],
        seconds=item["seconds"],
    )


def _call_row(run_id: str, call: dict[str, Any]) -> CallRow:
    return CallRow(
        run_id=run_id,
        agent=call["agent"],
        label=call["label"],
        model=call["model"],
        input_tokens=call["input_tokens"],
        output_tokens=call["output_tokens"],
        cached_tokens=call.get("cached_tokens") or 0,
        cost_usd=call.get("cost_usd"),
        latency_s=call.get("latency_s") or 0.0,
    )
