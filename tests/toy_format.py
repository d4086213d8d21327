"""A file format defined outside dsstar, as a user's format module is: `.toy` files hold one
record per line, as `key=value` pairs separated by semicolons:

    city=Oslo; visits=3
    city=Lima; visits=5; rainy=yes

Imported, it registers the format; named in DSSTAR_FORMATS, every dsstar process loads it."""

from __future__ import annotations

from pathlib import Path

from dsstar.data.formats import Format, register


def _records(path: Path) -> list[dict[str, str]]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        pairs = [part.split("=", 1) for part in line.split(";") if "=" in part]
        if pairs:
            records.append({key.strip(): value.strip() for key, value in pairs})
    return records


def describe_toy(path: Path, fmt: str) -> list[str]:
    """The profile's lines: records, and the keys they use as columns."""
    records = _records(path)
    columns = list(dict.fromkeys(key for record in records for key in record))
    return [f"Toy records: {len(records)} rows", f"Columns: {', '.join(columns)}"]


def toy_tables(path: Path, rows: int) -> list:
    """The records as one table, for a data contract."""
    import pandas as pd

    return [(None, pd.DataFrame.from_records(_records(path)[:rows]))]


TOY = register(Format("toy", (".toy",), "Toy", text=True, profile=describe_toy, tables=toy_tables))
