"""Documents and semi-structured formats: JSON, JSON Lines, text, Markdown, logs, HTML, PDF,
archives that were left packed, and unknown binaries."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import pandas as pd

from dsstar.data.profiler._base import (
    MAX_ROWS,
    Budget,
    count_lines,
    describe_frame,
    human,
    pick_encoding,
    read_head,
    short,
)

__all__ = [
    "describe_archive",
    "describe_binary",
    "describe_html",
    "describe_json",
    "describe_jsonl",
    "describe_pdf",
    "describe_text",
]

_MAX_KEY_PATHS = 60
_LOG_LEVEL = re.compile(r"\b(DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)\b")


def _json_type(value: object) -> str:
    """Type name; containers add their length."""
    if isinstance(value, list):
        return f"list ({len(value)} items)"
    return f"dict ({len(value)} keys)" if isinstance(value, dict) else type(value).__name__


def key_paths(value: object, prefix: str = "", depth: int = 0) -> list[str]:
    """Nested key paths such as `regions[].manager.name (str) e.g. 'Ada'`, depth-first,
    lists represented by their first items; bounded in depth and count."""
    out: list[str] = []
    if depth > 6:
        return out
    if isinstance(value, dict):
        for key, item in list(value.items())[:40]:
            path = f"{prefix}.{key}" if prefix else str(key)
            out.append(f"  {path}: {_json_type(item)}{_sample(item)}")
            out += key_paths(item, path, depth + 1)
    elif isinstance(value, list) and value:
        merged: dict = {}
        for item in value[:20]:  # the union of the first records' keys
            if isinstance(item, dict):
                merged.update({k: v for k, v in item.items() if k not in merged})
        first = merged or value[0]
        out += key_paths(first, f"{prefix}[]", depth + 1)
    return out[:_MAX_KEY_PATHS]


def _sample(item: object) -> str:
    return "" if isinstance(item, (dict, list)) else f" e.g. {short(repr(item), 40)}"


def describe_json(path: Path, fmt: str) -> list[str]:
    """Top-level type, nested key paths with sample values, and a table of records."""
    raw = read_head(path)
    if len(raw) < path.stat().st_size:
        raise ValueError(
            f"JSON document larger than the per-file bound ({Budget.max_bytes:,} bytes);"
            " read it with a streaming parser or duckdb.read_json"
        )
    data = json.loads(raw.decode(pick_encoding(raw)))
    out = [f"top-level type: {_json_type(data)}"]
    if not isinstance(data, (list, dict)):
        return out + [f"value: {short(data, 200)}"]
    paths = key_paths(data)
    out += ["nested key paths:", *paths] if paths else []
    if len(paths) >= _MAX_KEY_PATHS:
        out.append(f"  ... (first {_MAX_KEY_PATHS} key paths shown)")
    records = _records(data)
    if records is not None:
        name, rows = records
        out += [
            f"as a table of records{f' (under {name!r})' if name else ''}:",
            *describe_frame(pd.json_normalize(rows[:MAX_ROWS], max_level=1), len(rows)),
        ]
    return out


def _records(data: object) -> tuple[str, list] | None:
    """A list of objects at the top or under one top-level key."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data[:100]):
        return "", data
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, list) and value and all(isinstance(r, dict) for r in value[:100]):
                return str(key), value
    return None


def describe_jsonl(path: Path, fmt: str) -> list[str]:
    """Record count, keys with frequency, and a table summary of the first records."""
    records, count, bad = [], 0, 0
    raw = read_head(path)
    for line in filter(str.strip, raw.decode(pick_encoding(raw[:65536]), "replace").splitlines()):
        count += 1
        if len(records) < MAX_ROWS:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                bad += 1
    keys = Counter(k for r in records if isinstance(r, dict) for k in r)
    out = [
        f"records: {count:,}" + (f" ({bad} unparseable lines)" if bad else ""),
        "keys: " + (", ".join(f"{k} ({n})" for k, n in keys.most_common(50)) or "none"),
    ]
    dicts = [r for r in records if isinstance(r, dict)]
    if dicts:
        out += ["nested key paths:", *key_paths(dicts[:20])]
    return out + (describe_frame(pd.DataFrame(dicts), count - bad) if dicts else [])


def describe_text(path: Path, fmt: str) -> list[str]:
    """Line count, Markdown headings or log levels, and the first lines, from the first MB."""
    head = read_head(path, min(Budget.max_bytes, 1 << 20))
    text = head.decode(pick_encoding(head), errors="replace")
    lines = text.splitlines()
    total = count_lines(path)
    out = [f"lines: {total:,}" if total is not None else "lines: more than can be counted"]
    if fmt == "markdown" or (fmt == "text" and any(ln.startswith("# ") for ln in lines[:200])):
        heads = [ln for ln in lines if re.match(r"#{1,6} ", ln)][:30]
        out += ["headings:", *(f"  {h}" for h in heads)] if heads else ["headings: none"]
    if fmt == "log" or fmt == "text":
        levels = Counter(m.group(1) for ln in lines if (m := _LOG_LEVEL.search(ln)))
        if levels:
            out.append("log levels: " + ", ".join(f"{k} {n}" for k, n in levels.most_common()))
    return out + ["first lines:", *(f"  {short(ln, 200)}" for ln in lines[:10])]


def describe_html(path: Path, fmt: str) -> list[str]:
    """Title, headings, tables (pandas.read_html over lxml) and the leading text."""
    import lxml.html

    raw = read_head(path)
    doc = lxml.html.document_fromstring(raw.decode(pick_encoding(raw[:65536]), "replace"))
    title = (doc.findtext(".//title") or "").strip()
    heads = [
        f"  {el.tag}: {short(el.text_content().strip(), 120)}"
        for el in doc.iter("h1", "h2", "h3", "h4")
    ][:30]
    out = [f"title: {title or '(none)'}", *(["headings:", *heads] if heads else [])]
    tables: list[pd.DataFrame] = []
    if doc.find(".//table") is not None:
        from io import StringIO

        try:
            tables = pd.read_html(StringIO(lxml.html.tostring(doc, encoding="unicode")))
        except ValueError as exc:
            out.append(f"tables could not be parsed: {short(str(exc), 120)}")
    out.append(f"html tables: {len(tables)}")
    for i, df in enumerate(tables[:10]):
        out += [f"## table {i}", *describe_frame(df)]
    words = " ".join(doc.text_content().split())
    return out + [f"text: {short(words, 600)}"]


def describe_pdf(path: Path, fmt: str) -> list[str]:
    """Page count, metadata title and the text of the first pages (pypdf)."""
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    meta = reader.metadata or {}
    out = [f"pages: {len(reader.pages)}", f"title: {meta.get('/Title') or '(none)'}"]
    text = ""
    for page in reader.pages[:5]:
        text += (page.extract_text() or "") + "\n"
        if len(text) > 4000:
            break
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return out + ["no extractable text (scanned images?)"]
    return out + ["text of the first pages:", *(f"  {short(ln, 200)}" for ln in lines[:40])]


def describe_archive(path: Path, fmt: str) -> list[str]:
    """Member names and sizes from the index (nothing is extracted); a compressed stream
    shows its first decompressed bytes."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            members = [(i.filename, i.file_size) for i in zf.infolist()]
    else:
        head = read_head(path, 6)
        streams = {
            b"\x1f\x8b": ("gz", gzip.open),
            b"BZ": ("bz2", bz2.open),
            b"\xfd7": ("xz", lzma.open),
        }
        kind, opener = streams.get(head[:2], ("", None))
        mode = f"r:{kind}"  # its own compression only: see dsstar/data/lake/archives.py
        if opener and not _is_tar(path, mode):
            with opener(path, "rb") as fh:
                data = fh.read(4096)
            return [
                "a compressed stream; first decompressed lines:",
                *(
                    f"  {short(ln, 200)}"
                    for ln in data.decode("utf-8", "replace").splitlines()[:10]
                ),
            ]
        with tarfile.open(path, mode) as tf:
            members = [(m.name, m.size) for m in tf.getmembers()]
    out = [f"members: {len(members)}"]
    out += [f"  {name} ({human(size)})" for name, size in members[:100]]
    return out + ([f"  ... and {len(members) - 100} more"] if len(members) > 100 else [])


def _is_tar(path: Path, mode: str) -> bool:
    try:
        with tarfile.open(path, mode):
            return True
    except (OSError, EOFError, tarfile.TarError, lzma.LZMAError):
        return False


def describe_binary(path: Path, fmt: str) -> list[str]:
    """Unrecognised content: show the leading bytes so a human can identify it."""
    return [f"binary or unrecognised content; first bytes: {read_head(path, 32).hex(' ')}"]
