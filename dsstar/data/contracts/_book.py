"""Where contracts live and what callers do with them: create, check, accept, show.

    contracts/<data-root key>/<file key>.json     one document per tabular file:
        {"path", "format", "data", "gx_version", "created_at", "accepted",
         "tables": [{"table": <sheet/table name or null>, "suite": <GX suite JSON>}]}

A stored document is the user's: dsstar writes it only when none exists (the first analysis
of the file) or on `accept`. Edited suites are used exactly as they are.

    contracts/<data-root key>/passed/<file key>.json   the last passing validation:
        {"sha256": file content, "suite": digest of the document's suites, "statistics"}

The same content against the same suites passes again, so an unchanged file is not read or
validated twice (and a warm run never imports Great Expectations)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dsstar import keys
from dsstar.data.contracts._bounded import read_tables_bounded, suites_bounded
from dsstar.data.contracts._build import gx_version, suite_name
from dsstar.data.contracts._read import TABULAR_FORMATS, TableSkipped
from dsstar.data.contracts._validate import Failure, validate_frame
from dsstar.errors import ContractError, StorageError
from dsstar.storage import Store

if TYPE_CHECKING:
    from dsstar.data.sources import DataSource

__all__ = [
    "FileCheck",
    "accept_file",
    "check_data_root",
    "create_contract",
    "failed_paths",
    "load_contract",
    "stored_contracts",
    "validate_file",
]


class FileLike(Protocol):
    path: str
    format: str


@dataclass
class FileCheck:
    """What checking one file found: `status` is validated, failed, created or skipped."""

    path: str
    status: str
    failures: list[Failure]
    statistics: dict[str, Any]
    seconds: float
    reason: str | None = None  # why a file was skipped (a bound of reading, say)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "failed": self.failures,
            "statistics": self.statistics,
            "seconds": round(self.seconds, 3),
        } | ({"reason": self.reason} if self.reason else {})


def load_contract(store: Store, location: str, path: str) -> dict[str, Any] | None:
    """The stored document of one file, or None when it has no contract yet."""
    try:
        return store.read_json(keys.contract(location, path))
    except FileNotFoundError:
        return None


def create_contract(
    store: Store, location: str, root: Path, file: FileLike, accepted: bool = False
) -> dict[str, Any] | None:
    """Profile the file as it is now and store its contract (replacing any). None when the
    file holds no table (text, nested JSON...)."""
    if file.format not in TABULAR_FORMATS:
        return None
    try:  # built in a bounded child process: the file is untrusted
        suites = suites_bounded(root / file.path, file.format, file.path)
    except Exception as exc:  # an unreadable file gets no contract; analysis reports it
        raise ContractError(f"cannot profile {file.path}: {exc}") from exc
    if not suites:
        return None
    document = {
        "path": file.path,
        "format": file.format,
        "data": location,
        "gx_version": gx_version(),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "accepted": accepted,
        "tables": [{"table": name, "suite": suite} for name, suite in suites],
    }
    store.write_json(keys.contract(location, file.path), document)
    return document


def accept_file(store: Store, location: str, root: Path, file: FileLike) -> dict[str, Any] | None:
    """Adopt the file's current profile as its contract (the user's explicit decision)."""
    return create_contract(store, location, root, file, accepted=True)


def validate_file(
    store: Store, location: str, root: Path, file: FileLike, create: bool = True
) -> FileCheck:
    """Check one file against its stored contract. A file without one gets one now (when
    `create`): that is its first analysis, so there is nothing to compare with yet."""
    started = time.perf_counter()
    content = getattr(file, "sha256", "") or ""
    memo_key = keys.passed_contract(location, file.path)
    document = load_contract(store, location, file.path)
    if document is None:
        made, reason = _try_create(store, location, root, file) if create else (False, None)
        if made and content:  # a contract describes the content it was made from
            document = load_contract(store, location, file.path) or {}
            memo = {"sha256": content, "suite": _digest(document.get("tables"))}
            store.write_json(memo_key, {**memo, "statistics": {}})
        status = "created" if made else "skipped"
        return FileCheck(file.path, status, [], {}, time.perf_counter() - started, reason)
    memo = {"sha256": content, "suite": _digest(document.get("tables"))}
    if content and _passed_before(store, memo_key, memo):
        statistics = {**store.read_json(memo_key)["statistics"], "unchanged": True}
        return FileCheck(file.path, "validated", [], statistics, time.perf_counter() - started)
    failures, statistics = _check_document(document, root, file)
    if content and not failures:
        store.write_json(memo_key, {**memo, "statistics": statistics})
    status = "failed" if failures else "validated"
    return FileCheck(file.path, status, failures, statistics, time.perf_counter() - started)


def _digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, default=str).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()


def _passed_before(store: Store, key: str, memo: dict[str, str]) -> bool:
    try:
        last = store.read_json(key)
    except (FileNotFoundError, StorageError):
        return False
    return all(last.get(k) == v for k, v in memo.items())


def check_data_root(
    store: Store, location: str, root: Path, files: list[FileLike], create: bool = True
) -> dict[str, Any]:
    """Every file of a data root against its contract; contracts of vanished files fail.

    Returns {"checked": N validated against a stored suite, "failed": [...], "created":
    [paths given a first contract], "files": [per-file statistics and seconds]}."""
    checks = [validate_file(store, location, root, f, create=create) for f in files]
    present = {f.path for f in files}
    failed = [failure for c in checks for failure in c.failures]
    for document in stored_contracts(store, location):
        if document.get("path") not in present:
            failed.append({"path": document.get("path"), "expectation": "file exists",
                           "observed": "missing"})  # fmt: skip
    return {
        "checked": sum(c.status in {"validated", "failed"} for c in checks),
        "failed": failed,
        "created": [c.path for c in checks if c.status == "created"],
        "files": [c.to_dict() for c in checks if c.status != "skipped"],
        # Files left without a contract because reading them hit a bound, and why.
        "skipped": [{"path": c.path, "reason": c.reason} for c in checks if c.reason],
    }


def check_source(store: Store, source: DataSource) -> dict[str, Any]:
    """`check_data_root` over an opened data source, its files listed through the catalog
    (which keeps their content hashes indexed, so unchanged files are not hashed again)."""
    from dsstar.data.catalog import Catalog  # the catalog reads formats and profiles

    files = Catalog(store, source.location).files(source)
    return check_data_root(store, source.location, source.mount_dir, files)


def failed_paths(report: dict[str, Any]) -> set[str]:
    """The files (relative paths, sheets stripped) whose contract failed in `report`: a
    description cache must not serve these; they are analyzed again."""
    return {str(failure["path"]).split("#", 1)[0] for failure in report.get("failed", [])}


def stored_contracts(store: Store, location: str) -> list[dict[str, Any]]:
    """Every contract document stored for a data root, by path."""
    folder = keys.contracts_folder(location)
    documents = []
    for name in store.listdir(folder):
        if name.endswith(".json"):
            try:
                documents.append(store.read_json(f"{folder}/{name}"))  # a listed name
            except (FileNotFoundError, StorageError):
                continue  # a half-written or edited-to-invalid file: `show` reports the rest
    return sorted(documents, key=lambda d: str(d.get("path")))


def _try_create(store: Store, location: str, root: Path, file: FileLike) -> tuple[bool, str | None]:
    """Whether a contract was made, and why not when a bound of reading stopped it."""
    try:
        return create_contract(store, location, root, file) is not None, None
    except ContractError as exc:  # unreadable today: the analyzer will say why
        if isinstance(exc.__cause__, TableSkipped):
            return False, f"not read: {exc.__cause__}"
        return False, None


def _check_document(
    document: dict[str, Any], root: Path, file: FileLike
) -> tuple[list[Failure], dict[str, Any]]:
    def fail(expectation: str, observed: Any) -> tuple[list[Failure], dict[str, Any]]:
        return [{"path": file.path, "expectation": expectation, "observed": observed}], {}

    try:
        tables = {t.name: t for t in read_tables_bounded(root / file.path, file.format)}
    except TableSkipped as exc:  # e.g. it grew 2 million columns: it is not what it was
        return fail("file is readable within bounds", f"not read: {exc}")
    except Exception as exc:  # the file no longer parses as the format it had
        return fail("file is readable as " + str(document.get("format")), f"error: {exc}")
    failures: list[Failure] = []
    totals: dict[str, Any] = {}
    for entry in document.get("tables") or []:
        name = entry.get("table")
        table = tables.get(name)
        if table is None:
            failures.append({"path": file.path, "expectation": f"table {name!r} exists",
                             "observed": sorted(str(t) for t in tables)})  # fmt: skip
            continue
        try:
            found, stats = validate_frame(suite_name(file.path, name), entry["suite"], table.frame)
        except ContractError as exc:
            found, stats = [{"path": file.path, "expectation": "valid suite",
                             "observed": str(exc)}], {}  # fmt: skip
        failures += found
        for key, value in stats.items():
            if isinstance(value, int | float) and key != "success_percent":
                totals[key] = totals.get(key, 0) + value
    return failures, totals
