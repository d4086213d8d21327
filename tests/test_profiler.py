"""Tests for the LLM-free file profiler, on small real files written to tmp_path."""

import ast
import json
import sqlite3
import tarfile
import zipfile

import pandas as pd
import pytest
from test_data_lake import a_gzip_whose_bytes_read_as_a_tar_header

from dsstar.data import profiler
from dsstar.data.profiler import FORMATS, detect_format, profile_file


def test_formats_and_detection_by_suffix(tmp_path):
    assert FORMATS[".ndjson"] == "jsonl" and FORMATS[".tar.gz"] == "archive"
    cases = {
        "a.CSV": "csv",
        "b.tsv": "tsv",
        "c.Json": "json",
        "d.ndjson": "jsonl",
        "e.markdown": "markdown",
        "f.xlsm": "excel",
        "g.pq": "parquet",
        "h.db": "sqlite",
        "i.log": "log",
        "j.htm": "html",
        "k.tar.gz": "archive",
        "l.tgz": "archive",
    }
    for name, fmt in cases.items():
        assert detect_format(str(tmp_path / name)) == fmt, name


def test_detection_by_sniffing_unknown_suffix(tmp_path):
    db = tmp_path / "data.bin1"
    sqlite3.connect(db).execute("CREATE TABLE t (x INTEGER)").connection.commit()
    zipped = tmp_path / "bundle.dat"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("a.txt", "hi")
    text = tmp_path / "README"
    text.write_text("héllo wörld\n", encoding="utf-8")
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    assert detect_format(str(db)) == "sqlite"
    assert detect_format(str(zipped)) == "archive"
    assert detect_format(str(text)) == "text"
    assert detect_format(str(blob)) == "binary"


def test_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        profile_file(tmp_path / "nope.csv")


def test_csv_with_title_row(tmp_path):
    path = tmp_path / "sales.csv"
    path.write_text(
        "Quarterly sales report\n\nregion,units,price\nnorth,10,2.5\n"
        "south,,3.0\neast,7,1.25\nwest,3,4.0\n"
    )
    desc = profile_file(path, display_name="data/sales.csv")
    first = desc.splitlines()[0]
    assert "data/sales.csv" in first and "csv" in first and "bytes" in first
    assert "delimiter: ','" in desc and "encoding: utf-8" in desc
    assert "header is not on the first line" in desc and "Quarterly sales report" in desc
    assert "skiprows=2" in desc
    assert "rows: 4, columns: 3" in desc
    assert "region" in desc and "units" in desc and "price" in desc
    assert "nulls=1" in desc  # the missing units value
    assert "min=1.25, max=4.0" in desc
    assert "first 3 rows:" in desc and "north" in desc


def test_csv_with_a_title_padded_to_the_full_width(tmp_path):
    # A spreadsheet export: the title and the blank line have as many fields as the header.
    path = tmp_path / "counts.csv"
    path.write_text('Reports by Type,,\n,,\nYear,Fraud,Other\n2001,"137,306",12\n2002,5,6\n')
    desc = profile_file(path)
    assert "title: Reports by Type" in desc and "skiprows=2" in desc
    assert "rows: 2, columns: 3" in desc and "- Year (int64)" in desc and "Unnamed" not in desc
    # A one-column-wide header (',' padded) is still the header: nothing skipped.
    path.write_text("name,\nann,\nbob,\n")
    assert "skiprows" not in profile_file(path) and "- name" in profile_file(path)


def test_tsv(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("id\tname, full\tscore\n1\tAda, L\t9\n2\tBob, M\t7\n")
    desc = profile_file(path)
    assert "format: tsv" in desc and "delimiter: '\\t'" in desc
    assert "rows: 2, columns: 3" in desc and "name, full" in desc
    assert "header is not on the first line" not in desc


def test_latin1_csv_and_semicolons(tmp_path):
    path = tmp_path / "villes.csv"
    path.write_bytes("ville;pop\nZürich;400\nGenève;200\n".encode("latin-1"))
    desc = profile_file(path)
    assert "encoding: cp1252" in desc and "delimiter: ';'" in desc
    assert "Genève" in desc
    assert "Zürich" in desc and "rows: 2, columns: 2" in desc


def test_large_csv_is_sampled(tmp_path, monkeypatch):
    monkeypatch.setattr(profiler._tables, "MAX_ROWS", 50)
    path = tmp_path / "big.csv"
    path.write_text("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(120)))
    desc = profile_file(path)
    assert "~120 data rows" in desc and "first 50" in desc


def test_json_nested(tmp_path):
    path = tmp_path / "config.json"
    doc = {
        "meta": {"source": "api", "version": 2, "owner": {"name": "x", "deep": {"k": 1}}},
        "items": [{"id": 1, "tags": ["a"]}, {"id": 2, "tags": []}],
    }
    path.write_text(json.dumps(doc))
    desc = profile_file(path)
    assert "top-level type: dict (2 keys)" in desc
    assert "meta: dict (3 keys)" in desc and "meta.source: str e.g. 'api'" in desc
    assert "meta.owner.deep.k: int e.g. 1" in desc
    assert "items: list (2 items)" in desc and "items[].id: int" in desc
    assert "as a table of records (under 'items')" in desc


def test_json_list_of_records(tmp_path):
    path = tmp_path / "people.json"
    path.write_text(
        json.dumps(
            [
                {"name": "a", "age": 30, "addr": {"city": "x"}},
                {"name": "b", "age": 40, "addr": {"city": "y"}},
            ]
        )
    )
    desc = profile_file(path)
    assert "top-level type: list (2 items)" in desc
    assert "[].addr.city: str e.g. 'x'" in desc
    assert "as a table of records:" in desc and "rows: 2, columns: 3" in desc
    assert "addr.city" in desc and "min=30, max=40" in desc


def test_jsonl(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(
        '{"ts": 1, "kind": "click"}\n{"ts": 2, "kind": "view", "extra": 1}\n\nnot json\n'
    )
    desc = profile_file(path)
    assert "records: 3 (1 unparseable lines)" in desc
    assert "ts (2)" in desc and "kind (2)" in desc and "extra (1)" in desc


def test_markdown(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# Title\nintro line\n## Section A\ntext\n### Sub\n")
    desc = profile_file(path)
    assert "format: markdown" in desc and "lines: 5" in desc
    assert "# Title" in desc and "## Section A" in desc and "intro line" in desc


def test_excel_two_sheets(tmp_path):
    path = tmp_path / "book.xlsx"
    with pd.ExcelWriter(path) as writer:
        pd.DataFrame({"sku": ["a", "b", "c"], "qty": [1, 2, 3]}).to_excel(
            writer, sheet_name="Stock", index=False
        )
        pd.DataFrame({"store": ["x"], "city": ["Oslo"]}).to_excel(
            writer, sheet_name="Stores", index=False
        )
    desc = profile_file(path)
    assert "sheets (2): Stock, Stores" in desc
    assert "## sheet 'Stock'" in desc and "rows: 3, columns: 2" in desc and "sku" in desc
    assert "## sheet 'Stores'" in desc and "rows: 1, columns: 2" in desc and "Oslo" in desc


def test_parquet(tmp_path):
    path = tmp_path / "m.parquet"
    pd.DataFrame({"k": [1, 2, 3, 4], "v": ["a", None, "c", "d"]}).to_parquet(path)
    desc = profile_file(path)
    assert "format: parquet" in desc and "rows: 4, columns: 2" in desc
    assert "k (int64)" in desc and "nulls=1" in desc


def test_corrupt_parquet(tmp_path):
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"this is not parquet at all")
    desc = profile_file(path)
    assert "could not parse as Parquet" in desc


def test_sqlite_two_tables(tmp_path):
    path = tmp_path / "shop.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE orders (id INTEGER, customer_id INTEGER, total REAL);"
        "INSERT INTO customers VALUES (1, 'ann'), (2, 'bo');"
        "INSERT INTO orders VALUES (1, 1, 9.5), (2, 1, 3.0), (3, 2, 1.0);"
    )
    con.close()
    desc = profile_file(path)
    assert "tables (2): customers, orders" in desc
    assert "## table 'customers' (2 rows)" in desc and "## table 'orders' (3 rows)" in desc
    assert "name TEXT" in desc and "total REAL" in desc


def test_corrupt_sqlite(tmp_path):
    path = tmp_path / "bad.db"
    path.write_bytes(b"garbage" * 200)
    assert "could not parse as SQLite" in profile_file(path)


def test_zip_archive_lists_members_without_extracting(tmp_path):
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data/a.csv", "x,y\n1,2\n")
        zf.writestr("readme.txt", "hello")
    desc = profile_file(path)
    assert "members: 2" in desc and "data/a.csv" in desc and "readme.txt (5 bytes)" in desc
    assert not (tmp_path / "data").exists()


def test_tar_gz_archive(tmp_path):
    member = tmp_path / "inner.txt"
    member.write_text("abc")
    path = tmp_path / "b.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        tf.add(member, arcname="inner.txt")
    assert "inner.txt (3 bytes)" in profile_file(path)


def test_a_gzip_stream_whose_bytes_read_as_a_tar_header_is_a_stream(tmp_path):
    path = tmp_path / "numbers.gz"
    path.write_bytes(a_gzip_whose_bytes_read_as_a_tar_header(b"0" * 2_000_000))
    desc = profile_file(path)
    assert "a compressed stream; first decompressed lines:" in desc and "000000" in desc
    assert "members:" not in desc


def test_corrupt_zip(tmp_path):
    path = tmp_path / "bad.zip"
    path.write_bytes(b"nope")
    assert "could not parse as archive" in profile_file(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    desc = profile_file(path)
    assert "empty.csv" in desc and "empty" in desc.splitlines()[1].lower()


@pytest.mark.parametrize(
    "encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]
)
def test_utf16_and_utf32_text_is_profiled_as_text(tmp_path, encoding):
    """Windows tools write UTF-16 (with a BOM, or without one as `utf-16-le`); the file is
    still a CSV, and its cells are read, not shown as bytes."""
    path = tmp_path / "villes.csv"
    path.write_bytes("ville,pop\nZürich,400\nGenève,200\n".encode(encoding))
    notes = tmp_path / "notes"
    notes.write_bytes("Revenue rose in Zürich.\n".encode(encoding))
    assert detect_format(str(path)) == "csv" and detect_format(str(notes)) == "text"
    desc = profile_file(path)
    assert "format: csv" in desc and "rows: 2, columns: 2" in desc
    assert "Genève" in desc and "Zürich" in desc


def test_binary_blob(tmp_path):
    path = tmp_path / "blob.weird"
    path.write_bytes(b"\x00\xff\xfe" * 100)
    desc = profile_file(path)
    assert "format: binary" in desc and "00 ff fe" in desc


def test_html_never_raises(tmp_path):
    path = tmp_path / "page.html"
    path.write_text(
        "<html><body><table><tr><th>a</th></tr><tr><td>1</td></tr></table></body></html>"
    )
    desc = profile_file(path)
    assert "format: html" in desc and "could not parse" not in desc


def test_truncation(tmp_path):
    path = tmp_path / "wide.csv"
    cols = [f"column_{i}" for i in range(200)]
    path.write_text(",".join(cols) + "\n" + ",".join("1" for _ in cols) + "\n")
    desc = profile_file(path, max_chars=500)
    assert len(desc) <= 500 and desc.endswith("... (truncated)")


def test_ragged_csv_skips_malformed_lines(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("a,b\n1,2\n3,4,5\n6,7\n")
    desc = profile_file(path)
    assert "malformed lines skipped" in desc and "rows: 2, columns: 2" in desc


def test_directory_is_described_not_raised(tmp_path):
    assert "directory" in profile_file(tmp_path)


def test_time_columns_state_the_years_they_cover(tmp_path):
    # Year column made text by a footnote row, a date column, a yyyymm column; and a count
    # column whose values look like years but whose name says nothing of time.
    path = tmp_path / "series.csv"
    rows = "".join(f"{y},{y}-03-01,{y}07,9/22/{y},{y - 10}\n" for y in range(2001, 2025))
    path.write_text("Year,report_date,Period,Start Date,staff\n" + rows + "Source: agency,,,,\n")
    desc = profile_file(path)
    assert desc.count("years 2001-2024") == 4
    assert "years 1991-2014" not in desc
    one = tmp_path / "day.parquet"
    pd.DataFrame({"ts": pd.to_datetime(["2023-01-05", "2023-11-30"]), "x": [1, 2]}).to_parquet(one)
    assert "year 2023" in profile_file(one)


def test_the_sandboxed_script_and_its_reader_share_the_result_mark():
    from dsstar.data.profiler import _core, isolated

    assert isolated._MARK == _core.MARK


def test_listing_a_lake_does_not_import_the_readers():
    """Commands that only list files or read cached profiles skip pandas' import."""
    import subprocess
    import sys

    code = "import sys, dsstar.data.catalog, dsstar.data.profiler; print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def _killed_outside(times: int):
    """A stand-in for run_script: the first `times` scripts finish their first file, start
    the next (or start their only one) and are killed from outside (SIGKILL, no cap hit);
    later ones profile every file they are given."""
    import re

    from dsstar.data.profiler.isolated import _MARK
    from dsstar.execution.sandbox import ExecResult

    calls: list[list[str]] = []

    def run(code, **kwargs):
        names = ast.literal_eval(re.search(r"profile_batch\((\[.*?\]), (\[.*?\])", code)[2])
        calls.append(names)
        killed = len(calls) <= times
        records = []
        for n, name in enumerate(names):
            records.append({"start": name})
            if killed and (n == 1 or len(names) == 1):
                break
            records.append({"path": name, "text": name.upper()})
        output = "\n".join(_MARK + json.dumps(r) for r in records)
        return ExecResult(ok=not killed, exit_code=-9 if killed else 0, output=output,
                          timed_out=False, duration_s=0.1, truncated=False,
                          sandbox="bwrap")  # fmt: skip

    return run, calls


def test_a_profile_killed_from_outside_is_made_again_not_blamed_on_the_file(tmp_path, monkeypatch):
    from dsstar.data.profiler import isolated

    run, calls = _killed_outside(times=1)
    monkeypatch.setattr(isolated, "run_script", run)
    texts = profiler.profile_files(tmp_path, ["a.csv", "b.csv", "c.csv"])
    assert texts == {"a.csv": "A.CSV", "b.csv": "B.CSV", "c.csv": "C.CSV"}
    assert calls == [["a.csv", "b.csv", "c.csv"], ["b.csv", "c.csv"]]  # a.csv was finished


def test_a_profile_killed_from_outside_every_time_is_not_kept(tmp_path, monkeypatch):
    from dsstar.data.catalog import Catalog
    from dsstar.data.profiler import isolated
    from dsstar.data.sources import DataFile
    from dsstar.storage import Store

    run, calls = _killed_outside(times=100)
    monkeypatch.setattr(isolated, "run_script", run)
    texts = profiler.profile_files(tmp_path, ["a.csv", "b.csv"])
    assert texts["a.csv"] == "A.CSV"  # finished before each kill
    # The run that finished a.csv does not count: then b.csv alone, killed each time.
    assert calls == [["a.csv", "b.csv"]] + [["b.csv"]] * (1 + isolated.OUTSIDE_RETRIES)
    text = texts["b.csv"]
    assert profiler.failure("b.csv", text).startswith(profiler.KILLED_OUTSIDE)
    assert profiler.transient("b.csv", text)

    catalog = Catalog(Store(str(tmp_path / "store")), str(tmp_path))
    file = DataFile(path="b.csv", size=1, format="csv", sha256="0" * 64)
    assert catalog.profiles([file], lambda _: {"b.csv": text}) == {"b.csv": text}
    again = catalog.profiles([file], lambda _: {"b.csv": "File: b.csv\nrows: 1"})
    assert again == {"b.csv": "File: b.csv\nrows: 1"}  # profiled again: nothing was kept
