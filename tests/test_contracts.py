"""Data contracts in the core: suites derived from CSV, TSV, Parquet, Excel and JSON records,
validated with Great Expectations against refreshed data, edited by users, accepted, stored
locally and on S3, and the `dsstar contracts` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forked_cli
import pandas as pd
import pytest

from dsstar.data.contracts import (
    accept_file,
    check_data_root,
    failed_paths,
    load_contract,
    read_tables,
    validate_file,
)
from dsstar.data.sources import DataSource
from dsstar.keys import contract
from dsstar.storage import Store
from dsstar.views.report import run_result
from flows.nightly import contracts_cell

ORDERS = pd.DataFrame(
    {
        "order_id": [1001, 1002, 1003, 1004, 1005, 1006],
        "region": ["NE", "SW", "NE", "MW", "SW", "NE"],
        "units": [10, 3, 1, 25, 4, 2],
        "price": [2.5, 12.0, 12.0, 2.5, 2.5, 30.0],
    }
)


def write(folder: Path, name: str, frame: pd.DataFrame) -> Path:
    path = folder / name
    if name.endswith(".csv"):
        frame.to_csv(path, index=False)
    elif name.endswith(".tsv"):
        frame.to_csv(path, index=False, sep="\t")
    elif name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    elif name.endswith(".xlsx"):
        with pd.ExcelWriter(path) as book:
            frame.to_excel(book, sheet_name="orders", index=False)
            frame[["region"]].drop_duplicates().to_excel(book, sheet_name="regions", index=False)
    elif name.endswith(".json"):
        path.write_text(frame.to_json(orient="records"))
    return path


@pytest.fixture
def lake(tmp_path):
    root = tmp_path / "lake"
    root.mkdir()
    for name in ("orders.csv", "orders.tsv", "orders.parquet", "book.xlsx", "records.json"):
        write(root, name, ORDERS)
    (root / "notes.md").write_text("# not a table\n")
    (root / "nested.json").write_text(json.dumps({"regions": [{"code": "NE"}]}))
    return root


def check(store: Store, root: Path) -> dict:
    source = DataSource(str(root), root.parent / "cache")
    return check_data_root(store, str(root), source.mount_dir, source.files())


def test_first_check_creates_one_suite_per_tabular_file(lake, tmp_path):
    store = Store(str(tmp_path / "storage"))
    report = check(store, lake)
    assert report["checked"] == 0 and report["failed"] == []
    assert sorted(report["created"]) == [
        "book.xlsx", "orders.csv", "orders.parquet", "orders.tsv", "records.json"
    ]  # fmt: skip
    document = load_contract(store, str(lake), "orders.csv")
    assert document["gx_version"] and document["format"] == "csv"
    kinds = {(e["type"], e["kwargs"].get("column")) for e in document["tables"][0]["suite"][
        "expectations"]}  # fmt: skip
    assert ("expect_table_columns_to_match_ordered_list", None) in kinds
    assert ("expect_table_row_count_to_be_between", None) in kinds
    assert ("expect_column_values_to_be_of_type", "units") in kinds
    assert ("expect_column_values_to_not_be_null", "units") in kinds
    assert ("expect_column_values_to_be_between", "units") in kinds
    assert ("expect_column_values_to_be_in_set", "region") in kinds
    assert ("expect_column_values_to_be_unique", "order_id") in kinds
    assert ("expect_column_values_to_be_unique", "units") not in kinds  # no identifier
    book = load_contract(store, str(lake), "book.xlsx")
    assert [t["table"] for t in book["tables"]] == ["orders", "regions"]
    assert (tmp_path / "storage" / contract(str(lake), "orders.csv")).is_file()

    import great_expectations as gx  # the stored JSON is a GX 1.x suite as is

    suite = gx.ExpectationSuite(**{k: v for k, v in document["tables"][0]["suite"].items()})
    assert len(suite.expectations) == len(document["tables"][0]["suite"]["expectations"])


def test_compatible_refresh_validates_every_format(lake, tmp_path):
    store = Store(str(tmp_path / "storage"))
    check(store, lake)
    grown = pd.concat([ORDERS, pd.DataFrame({"order_id": [1007], "region": ["MW"],
                                             "units": [7], "price": [12.0]})])  # fmt: skip
    for name in ("orders.csv", "orders.tsv", "orders.parquet", "book.xlsx", "records.json"):
        write(lake, name, grown)
    report = check(store, lake)
    assert report["failed"] == [] and report["checked"] == 5
    stats = {f["path"]: f["statistics"] for f in report["files"]}
    assert stats["orders.csv"]["evaluated_expectations"] >= 10
    assert stats["book.xlsx"]["unsuccessful_expectations"] == 0


def test_unchanged_content_against_unchanged_suites_is_not_validated_again(lake, tmp_path):
    from dsstar.data.catalog import Catalog

    store = Store(str(tmp_path / "storage"))
    source = DataSource(str(lake), tmp_path / "cache")

    def hashed_check() -> dict:
        files = Catalog(store, str(lake)).files(source)
        report = check_data_root(store, str(lake), source.mount_dir, files)
        return {f["path"]: f["statistics"] for f in report["files"]}

    hashed_check()  # creates the suites from today's content
    assert hashed_check()["orders.csv"] == {"unchanged": True}  # the content they describe
    grown = pd.concat([ORDERS, ORDERS.tail(1).assign(order_id=1007)])
    write(lake, "orders.csv", grown)
    first = hashed_check()  # new content: read and validated with GX, the pass remembered
    assert first["orders.csv"]["evaluated_expectations"] >= 10
    assert "unchanged" not in first["orders.csv"]
    again = hashed_check()
    assert again["orders.csv"]["unchanged"] is True  # no read, no GX: the last pass holds
    assert again["orders.csv"]["evaluated_expectations"] == first["orders.csv"][
        "evaluated_expectations"]  # fmt: skip
    # An edited suite is validated for real, and can fail on the same content.
    key = contract(str(lake), "orders.csv")
    document = store.read_json(key)
    for expectation in document["tables"][0]["suite"]["expectations"]:
        if expectation["type"] == "expect_table_row_count_to_be_between":
            expectation["kwargs"].update(min_value=100, max_value=200)
    store.write_json(key, document)
    files = Catalog(store, str(lake)).files(source)
    report = check_data_root(store, str(lake), source.mount_dir, files)
    assert failed_paths(report) == {"orders.csv"}


@pytest.mark.parametrize(
    ("change", "expectation", "observed"),
    [
        (lambda f: f.rename(columns={"units": "quantity"}),
         "expect_table_columns_to_match_ordered_list", ["order_id", "region", "quantity", "price"]),
        (lambda f: f.assign(units=["ten", "3", "1", "25", "4", "2"]),
         "expect_column_values_to_be_of_type(column=units", "str"),
        (lambda f: f.assign(units=[10, 3, 1, 25_000, 4, 2]),
         "expect_column_values_to_be_between(column=units",
         {"unexpected_count": 1, "examples": [25000.0]}),
    ],
    ids=["renamed column", "type change", "out of range"],
)  # fmt: skip
@pytest.mark.parametrize("name", ["orders.csv", "orders.parquet", "book.xlsx"])
def test_breaking_changes_are_named_with_what_was_observed(
    lake, tmp_path, name, change, expectation, observed
):
    store = Store(str(tmp_path / "storage"))
    check(store, lake)
    write(lake, name, change(ORDERS))
    report = check(store, lake)
    failures = [f for f in report["failed"] if f["path"].split("#")[0] == name]
    assert any(
        f["expectation"].startswith(expectation) and f["observed"] == observed for f in failures
    ), failures
    assert {f["path"].split("#")[0] for f in report["failed"]} == {name}


def test_edited_suite_is_honoured_and_accept_replaces_it(lake, tmp_path):
    store = Store(str(tmp_path / "storage"))
    check(store, lake)
    key = contract(str(lake), "orders.csv")
    document = store.read_json(key)
    suite = document["tables"][0]["suite"]
    for item in suite["expectations"]:  # the user tightens the range of units
        if item["type"] == "expect_column_values_to_be_between" and item["kwargs"]["column"] == (
            "units"
        ):
            item["kwargs"]["max_value"] = 20
    store.write_json(key, document)
    source = DataSource(str(lake), tmp_path / "cache")
    orders = next(f for f in source.files() if f.path == "orders.csv")

    result = validate_file(store, str(lake), source.mount_dir, orders)
    assert result.status == "failed"
    assert result.failures[0]["expectation"].endswith("max_value=20.0)")
    assert store.read_json(key) == document  # checking never rewrites the user's suite

    accept_file(store, str(lake), source.mount_dir, orders)
    assert store.read_json(key)["accepted"] is True
    assert validate_file(store, str(lake), source.mount_dir, orders).status == "validated"


def test_vanished_file_and_invalid_suite_fail_by_name(lake, tmp_path):
    store = Store(str(tmp_path / "storage"))
    check(store, lake)
    (lake / "orders.tsv").unlink()
    key = contract(str(lake), "orders.csv")
    document = store.read_json(key)
    document["tables"][0]["suite"]["expectations"].append({"type": "expect_nonsense", "kwargs": {}})
    store.write_json(key, document)
    report = check(store, lake)
    assert failed_paths(report) == {"orders.tsv", "orders.csv"}
    failed = {(f["path"], f["expectation"]) for f in report["failed"]}
    assert ("orders.tsv", "file exists") in failed
    assert ("orders.csv", "valid suite") in failed


def test_contracts_live_in_s3_storage(lake, s3):
    store = Store(s3)
    check(store, lake)
    assert store.exists(contract(str(lake), "orders.parquet"))
    write(lake, "orders.parquet", ORDERS.rename(columns={"price": "cost"}))
    assert [f["path"] for f in check(store, lake)["failed"]][:1] == ["orders.parquet"]


def test_bounded_reads_mark_truncated_tables(tmp_path):
    path = write(tmp_path, "big.csv", pd.DataFrame({"n": range(50)}))
    (table,) = read_tables(path, "csv", max_rows=20)
    assert len(table.frame) == 20 and table.truncated


def test_importing_contracts_does_not_import_great_expectations():
    modules = "dsstar.data.contracts, flows._contracts"
    code = f"import sys, {modules}; print('great_expectations' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_new_files_get_contracts_without_pandas_in_this_process(lake, tmp_path):
    """The reader builds a new file's suites: a first run's process never imports pandas,
    pyarrow or Great Expectations for its contracts (start-up time and memory)."""
    code = (
        "import sys; from pathlib import Path; from dsstar.data.sources import DataSource;"
        " from dsstar.data.contracts import check_data_root; from dsstar.storage import Store;"
        f" root = Path({str(lake)!r}); source = DataSource(str(root), root.parent / 'cache');"
        f" report = check_data_root(Store({str(tmp_path / 'storage')!r}), str(root),"
        " source.mount_dir, source.files());"
        " print(len(report['created']), sorted(m for m in ('pandas', 'pyarrow',"
        " 'great_expectations') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "5 []", out.stderr[-2000:]
    document = load_contract(Store(str(tmp_path / "storage")), str(lake), "book.xlsx")
    assert [t["suite"]["name"] for t in document["tables"]] == ["book.xlsx#orders",
                                                                 "book.xlsx#regions"]  # fmt: skip


def test_a_contract_too_big_to_take_back_is_skipped_by_name(lake, tmp_path, monkeypatch):
    """What the reader sends is sized before it is read: past the bound, no contract."""
    from dsstar.data.contracts import _bounded

    monkeypatch.setattr(_bounded, "_MAX_SUITES_BYTES", 20_000)
    (lake / "wide.csv").write_text(",".join(f"column_{i}" for i in range(400)) + "\n"
                                   + ",".join(str(i) for i in range(400)) + "\n")  # fmt: skip
    report = check(Store(str(tmp_path / "storage")), lake)
    [skipped] = [s for s in report["skipped"] if s["path"] == "wide.csv"]
    reason = skipped["reason"]
    assert reason.startswith("not read: its contract takes") and "more than 20,000" in reason
    assert "orders.csv" in report["created"] and "wide.csv" not in report["created"]


def test_run_json_and_nightly_table_carry_contract_failures():
    failure = {"path": "a.csv", "expectation": "expect_x(column=b)", "observed": "str"}
    record = {"contracts": {"checked": 2, "failed": [failure], "files": []}}
    assert run_result(record, "uri")["contracts"] == {"checked": 2, "failed": [failure]}
    assert run_result({}, "uri")["contracts"] == {"checked": 0, "failed": []}
    assert contracts_cell({"checked": 2, "failed": []}) == "ok (2 checked)"
    assert contracts_cell({"checked": 2, "failed": [failure]}) == (
        "1 failed: a.csv: expect_x(column=b) observed str"
    )


@pytest.mark.slow
def test_cli_validate_accept_show(lake, tmp_path):
    storage = str(tmp_path / "storage")

    def dsstar(*args: str) -> subprocess.CompletedProcess:
        return forked_cli.run([sys.executable, "-m", "dsstar", "contracts", *args,
                               "--storage", storage], capture_output=True, text=True,
                              env=os.environ.copy())  # fmt: skip

    accepted = dsstar("accept", str(lake), "--json")
    assert accepted.returncode == 0, accepted.stderr
    assert "orders.csv" in json.loads(accepted.stdout)["accepted"]
    write(lake, "orders.csv", ORDERS.assign(units=[10, 3, 1, 25_000, 4, 2]))

    failed = dsstar("validate", str(lake), "--data-docs")
    assert failed.returncode == 1
    lines = failed.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("FAILED orders.csv: expect_column_values_to_be")
    docs = next(Path(storage, "contracts-docs").iterdir())
    summary = (docs / "summary.html").read_text()
    assert "25000" in summary and "orders.csv" in summary
    assert "Data Docs" in (docs / "gx" / "index.html").read_text()  # GX's own site
    rendered = [p.read_text() for p in (docs / "gx" / "validations").rglob("*.html")]
    assert any("expect_column_values_to_be_between" in page or "25000" in page
               for page in rendered)  # fmt: skip

    assert dsstar("accept", str(lake), "--path", "orders.csv").returncode == 0
    assert dsstar("validate", str(lake)).returncode == 0
    shown = json.loads(dsstar("show", str(lake), "--json").stdout)
    assert {c["path"] for c in shown["contracts"]} >= {"orders.csv", "book.xlsx"}
    assert dsstar("accept", str(lake), "--path", "nope.csv").returncode == 2
