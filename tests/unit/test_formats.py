"""Every format, profiled inside the sandbox the way `describe --offline` and the fallback
description read them: small real files written to tmp_path, one batch script for all."""

from __future__ import annotations

import gzip
import json
import sqlite3
import zipfile
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from dsstar.data.profiler import ProfileLimits, profile_files
from dsstar.data.sources import DataSource


def pdf_bytes(lines: list[str]) -> bytes:
    """A one-page PDF showing `lines` in Helvetica, with a correct cross-reference table."""
    text = " ".join(f"({line}) Tj 0 -20 Td" for line in lines)
    stream = f"BT /F1 12 Tf 72 720 Td {text} ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (Quarterly Review) >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\n" % (len(objects) + 1)
    return bytes(out + b"startxref\n%d\n%%%%EOF\n" % xref)


def write_lake(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "prices.csv").write_bytes("produit;prix\nCafé;1,50\nThé;2,25\n".encode("cp1252"))
    (root / "scores.tsv").write_text("id\tscore\n1\t9\n2\t7\n")
    with pd.ExcelWriter(root / "book.xlsx") as writer:
        pd.DataFrame({"sku": ["a", "b"], "qty": [1, 2]}).to_excel(
            writer, sheet_name="Stock", index=False
        )
        pd.DataFrame({"store": ["x"]}).to_excel(writer, sheet_name="Stores", index=False)
    pd.DataFrame({"k": [1, 2, 3], "v": ["p", "q", None]}).to_parquet(root / "m.parquet")
    doc = {"regions": [{"code": "NE", "manager": {"name": "Ada Park"}}], "version": 3}
    (root / "regions.json").write_text(json.dumps(doc))
    (root / "events.jsonl").write_text('{"ts": 1, "kind": "click"}\n{"ts": 2, "kind": "view"}\n')
    con = sqlite3.connect(root / "shop.sqlite")
    con.executescript(
        "CREATE TABLE orders (id INTEGER, total REAL); INSERT INTO orders VALUES (1, 2.5);"
    )
    con.close()
    with duckdb.connect(str(root / "wh.duckdb")) as db:
        db.execute("CREATE TABLE sales AS SELECT range AS day, range * 2 AS amount FROM range(5)")
    (root / "notes.md").write_text("# Handbook\nintro\n## Refunds\ntext\n")
    (root / "page.html").write_text(
        "<html><head><title>Fleet</title></head><body><h1>Vehicles</h1>"
        "<table><tr><th>plate</th><th>km</th></tr><tr><td>AB1</td><td>120</td></tr></table>"
        "</body></html>"
    )
    (root / "app.log").write_text("2024-01-01 INFO start\n2024-01-01 ERROR disk full\n")
    (root / "review.pdf").write_bytes(pdf_bytes(["Revenue grew in the north", "Costs fell"]))
    (root / "actually_json.csv").write_text(json.dumps([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]))
    (root / "metrics.csv.gz").write_bytes(gzip.compress(b"metric,value\ncpu,0.5\nram,0.7\n"))
    with zipfile.ZipFile(root / "bundle.zip", "w") as zf:
        zf.writestr("inner/table.csv", "name,age\nann,31\n")
    (root / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (root / "empty.txt").write_bytes(b"")
    (root / "bad.parquet").write_bytes(b"PAR1 not really")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("formats")
    write_lake(base / "lake")
    source = DataSource(str(base / "lake"), base / "cache")
    paths = [f.path for f in source.files()]
    texts = profile_files(source.mount_dir, paths, limits=ProfileLimits(batch_files=8))
    assert list(texts) == paths  # every file gets a text, in order
    return texts


def test_csv_encoding_delimiter_and_decimal_comma(profiles):
    text = profiles["prices.csv"]
    assert "encoding: cp1252, delimiter: ';'" in text and "decimal comma" in text
    assert "prix (float64)" in text and "min=1.5, max=2.25" in text and "Café" in text


def test_tsv(profiles):
    assert (
        "delimiter: '\\t'" in profiles["scores.tsv"] and "score (int64)" in profiles["scores.tsv"]
    )


def test_excel_every_sheet(profiles):
    text = profiles["book.xlsx"]
    assert "sheets (2): Stock, Stores" in text and "## sheet 'Stores'" in text and "sku" in text


def test_parquet(profiles):
    assert "rows: 3, columns: 2" in profiles["m.parquet"] and "v (" in profiles["m.parquet"]


def test_json_nested_key_paths(profiles):
    text = profiles["regions.json"]
    assert "regions[].manager.name: str e.g. 'Ada Park'" in text and "version: int" in text


def test_jsonl(profiles):
    assert "records: 2" in profiles["events.jsonl"] and "kind (2)" in profiles["events.jsonl"]


def test_sqlite_and_duckdb_tables(profiles):
    assert "tables (1): orders" in profiles["shop.sqlite"]
    assert "## table 'orders' (1 rows)" in profiles["shop.sqlite"]
    duck = profiles["wh.duckdb"]
    assert "format: duckdb" in duck and "tables (1): sales" in duck
    assert "## table 'sales' (5 rows)" in duck and "amount BIGINT" in duck


def test_markdown_html_log_pdf(profiles):
    assert "## Refunds" in profiles["notes.md"]
    html = profiles["page.html"]
    assert "title: Fleet" in html and "h1: Vehicles" in html and "html tables: 1" in html
    assert "plate" in html
    assert "format: log" in profiles["app.log"] and "ERROR 1" in profiles["app.log"]
    pdf = profiles["review.pdf"]
    assert "pages: 1" in pdf and "Quarterly Review" in pdf and "Revenue grew in the north" in pdf


def test_content_beats_the_extension(profiles):
    text = profiles["actually_json.csv"]
    assert "format: json" in text and "[].a: int" in text


def test_archive_members_profile_as_their_own_format(profiles):
    assert "format: csv" in profiles["metrics.csv.gz/metrics.csv"]
    assert "metric (" in profiles["metrics.csv.gz/metrics.csv"]
    assert "age (int64)" in profiles["bundle.zip/inner/table.csv"]


def test_odd_files_get_a_stated_description(profiles):
    assert "format: binary" in profiles["blob.bin"]
    assert "The file is empty." in profiles["empty.txt"]
    assert "could not parse as Parquet" in profiles["bad.parquet"]
    assert all(len(text) <= 6000 for text in profiles.values())


def test_per_file_time_and_byte_bounds(tmp_path):
    root = tmp_path / "big"
    root.mkdir()
    rows = "".join(f"{i},{i * 3},name{i}\n" for i in range(1_000_000))
    (root / "big.csv").write_text("a,b,c\n" + rows)
    (root / "small.csv").write_text("a\n1\n")
    source = DataSource(str(root), tmp_path / "cache")
    slow = profile_files(source.mount_dir, ["big.csv", "small.csv"],
                         limits=ProfileLimits(file_timeout_s=0.05))  # fmt: skip
    assert "took longer than the 0.05 s per-file bound" in slow["big.csv"]
    assert slow["small.csv"].startswith("File: small.csv")  # the batch went on
    capped = profile_files(
        source.mount_dir, ["big.csv"], limits=ProfileLimits(file_max_bytes=100_000)
    )
    assert "only the first 100,000 bytes were read" in capped["big.csv"]


def test_a_script_killed_midway_keeps_the_finished_files(tmp_path):
    root = tmp_path / "mem"
    root.mkdir()
    (root / "a.txt").write_text("first\n")
    (root / "huge.json").write_text(json.dumps([{"k": "v" * 50} for _ in range(1_000_000)]))
    (root / "z.txt").write_text("last\n")
    source = DataSource(str(root), tmp_path / "cache")
    texts = profile_files(source.mount_dir, ["a.txt", "huge.json", "z.txt"],
                          limits=ProfileLimits(memory_mb=400))  # fmt: skip
    assert "first" in texts["a.txt"] and "last" in texts["z.txt"]
    assert "not profiled" in texts["huge.json"] or "could not parse" in texts["huge.json"]
