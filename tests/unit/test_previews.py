"""Previews of the tables a script wrote are read in the bounded table reader, never in the
dsstar process, and a file that would decode past a bound is named with the reason instead:
a 100-column Parquet file of zeros (about 40 KB, zstd) that decodes to 800 MB, and Excel
workbooks of a few hundred KB whose sheet XML runs to hundreds of MB. The run goes on; the
verifier's prompt says why there is no preview; this process and the reader stay small."""

from __future__ import annotations

import base64
import re
import resource
import zipfile
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsstar.data.contracts import ReadBounds
from dsstar.data.contracts._bounded import _CHILD
from dsstar.data.previews import preview_file, with_previews
from dsstar.execution.deliverables import outputs_text
from dsstar.execution.sandbox import ExecResult

MB = 1 << 20


def parquet_of_zeros(path: Path, rows: int = 1_000_000, columns: int = 100) -> int:
    """Zeros in one page per column (PLAIN, zstd): a page inflates a thousandfold, and the
    column chunks of a row group decode together. Returns its decoded size."""
    zeros = pa.array(np.zeros(rows, dtype="int64"))  # one array, in every column
    table = pa.table({f"c{i}": zeros for i in range(columns)})
    one_page = {"data_page_size": 1 << 30, "write_batch_size": rows, "max_rows_per_page": rows}
    pq.write_table(
        table, path, compression="zstd", use_dictionary=False, row_group_size=rows, **one_page
    )
    return rows * columns * 8


_PARTS = {
    "[Content_Types].xml": (
        '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
        'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.'
        'openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType='
        '"application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd'
        '.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl'
        '/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        'spreadsheetml.worksheet+xml"/></Types>'
    ),
    "_rels/.rels": (
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
        'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://'
        'schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target='
        '"xl/workbook.xml"/></Relationships>'
    ),
    "xl/workbook.xml": (
        '<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.'
        'org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/'
        'officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id='
        '"rId1"/></sheets></workbook>'
    ),
    "xl/_rels/workbook.xml.rels": (
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
        'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://'
        'schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target='
        '"worksheets/sheet1.xml"/></Relationships>'
    ),
}


def workbook_of_zeros(path: Path, rows: int, dimension: bool) -> int:
    """An .xlsx whose one sheet holds `rows` rows of ten zeros, deflated (about 260 bytes of
    XML per compressed byte), with or without a stated dimension. Returns the sheet's size."""
    row = b"<row>" + b'<c t="n"><v>0</v></c>' * 10 + b"</row>"
    head = b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'  # noqa: E501
    if dimension:
        head += f'<dimension ref="A1:J{rows}"/>'.encode()
    head += b"<sheetData>"
    tail = b"</sheetData></worksheet>"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as book:
        for name, text in _PARTS.items():
            book.writestr(name, text)
        with book.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(head)
            block = row * 10_000
            for _ in range(rows // 10_000):
                sheet.write(block)
            sheet.write(tail)
    return len(head) + len(row) * rows + len(tail)


def reader_peak_mb() -> list[int]:
    """The peak resident memory of each running reader (VmHWM), in MB."""
    peaks = []
    for child in _CHILD.values():
        if child.poll() is None:
            status = Path(f"/proc/{child.pid}/status").read_text()
            peaks.append(int(status.split("VmHWM:")[1].split()[0]) // 1024)
    return peaks


def own_peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def result_with(name: str, data: bytes) -> ExecResult:
    item = {"name": name, "bytes": len(data), "data": base64.b64encode(data).decode()}
    return ExecResult(True, 0, "", False, 0.1, False, "none", outputs=[item])


def previewed(tmp_path: Path, name: str, data: bytes, bounds: ReadBounds | None = None):
    """The result of a script that wrote `data` as `name`, previewed; and how much this
    process's peak memory grew past what it held before (0 when below an earlier peak)."""
    result = result_with(name, data)
    del data
    before, peak = psutil.Process().memory_info().rss // MB, own_peak_mb()
    done = with_previews(result, tmp_path, bounds)
    return done, max(0, own_peak_mb() - max(peak, before))


def test_a_parquet_file_of_zeros_is_not_inflated_anywhere(tmp_path):
    decoded = parquet_of_zeros(tmp_path / "zeros.parquet")
    data = (tmp_path / "zeros.parquet").read_bytes()
    assert len(data) < 100_000 and decoded == 800_000_000
    done, grew = previewed(tmp_path, "out/zeros.parquet", data)
    preview = done.outputs[0]["preview"]
    stated = re.search(r"lie in ([\d,]+) bytes of uncompressed pages", preview["skipped"])
    assert stated and int(stated.group(1).replace(",", "")) >= decoded
    text = outputs_text(done.outputs)
    assert text.startswith(f"out/zeros.parquet ({len(data):,} bytes)")
    assert "\npreview skipped: its first rows lie in" in text
    assert grew < 100, f"this process grew {grew} MB"
    assert reader_peak_mb() and all(peak < 600 for peak in reader_peak_mb()), reader_peak_mb()


@pytest.mark.parametrize(
    ("rows", "dimension", "reason"),
    [
        # No dimension: openpyxl would parse the whole 22 MB sheet to find one, at a few MB/s.
        (100_000, False, "would be parsed whole before its first row"),
        # A stated dimension, rows streamed; but the parts inflate past the reader's quarter.
        (700_000, True, "its parts decompress to"),
    ],
)
def test_an_excel_workbook_whose_sheet_inflates_is_named_not_parsed(
    tmp_path, rows, dimension, reason
):
    sheet = workbook_of_zeros(tmp_path / "zeros.xlsx", rows, dimension)
    data = (tmp_path / "zeros.xlsx").read_bytes()
    assert sheet > 100 * len(data)
    bounds = ReadBounds(timeout_s=30, memory_mb=512)  # first rows may decode from 128 MB
    done, grew = previewed(tmp_path, "zeros.xlsx", data, bounds)
    assert reason in done.outputs[0]["preview"]["skipped"]
    assert "\npreview skipped: " in outputs_text(done.outputs)
    assert grew < 100, f"this process grew {grew} MB"


def test_a_stated_dimension_lets_the_first_rows_stream(tmp_path):
    workbook_of_zeros(tmp_path / "rows.xlsx", 100_000, dimension=True)  # 22 MB of sheet XML
    preview = preview_file(tmp_path / "rows.xlsx", "rows.xlsx", rows=3)
    assert preview["shape"] == [99_999, 10] and len(preview["head"]) == 3


def test_a_wide_table_shows_its_first_columns_and_says_how_many_it_has(tmp_path):
    names = [f"c{i}" for i in range(250)]
    (tmp_path / "wide.csv").write_text(",".join(names) + "\n" + ",".join("1" * 250) + "\n")
    preview = preview_file(tmp_path / "wide.csv", "wide.csv")
    assert preview["shape"] == [1, 250] and len(preview["columns"]) == len(preview["head"][0])
    text = outputs_text([{"name": "wide.csv", "bytes": 1000, "preview": preview}])
    assert "table: 1 rows x 250 columns\ncolumns (the first 100): ['c0', 'c1'," in text
