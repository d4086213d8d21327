"""Data contracts: one Great Expectations 1.x suite per tabular file, derived from the file
when it is first analyzed, stored beside the descriptions, checked before a stored solution
(or a cached description) is trusted on refreshed data, and owned by the user afterwards.

Great Expectations is imported lazily, only when a contract is validated. The bounded reader
that reads files for contracts (outside the dsstar process) also previews the tables a script
wrote (`preview_bounded`)."""

from dsstar.data.contracts._book import (
    FileCheck,
    accept_file,
    check_data_root,
    check_source,
    create_contract,
    failed_paths,
    load_contract,
    stored_contracts,
    validate_file,
)
from dsstar.data.contracts._bounded import ReadBounds, preview_bounded, warm_reader
from dsstar.data.contracts._build import build_suite, gx_version
from dsstar.data.contracts._docs import build_data_docs
from dsstar.data.contracts._read import MAX_ROWS, TABULAR_FORMATS, TableSkipped, read_tables
from dsstar.data.contracts._report import failures_markdown, render_html

__all__ = [
    "MAX_ROWS",
    "TABULAR_FORMATS",
    "TableSkipped",
    "FileCheck",
    "ReadBounds",
    "accept_file",
    "build_data_docs",
    "build_suite",
    "check_data_root",
    "check_source",
    "create_contract",
    "failed_paths",
    "failures_markdown",
    "gx_version",
    "load_contract",
    "preview_bounded",
    "read_tables",
    "render_html",
    "stored_contracts",
    "validate_file",
    "warm_reader",
]
