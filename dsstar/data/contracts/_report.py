"""Human-readable views of a contract check: Markdown (Prefect artifacts) and HTML (the
`--data-docs` report). GX's own Data Docs need a file-backed project, which dsstar does not
keep, so this small self-contained page stands in for them."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

from dsstar.text import md_text

__all__ = ["failures_markdown", "render_html"]


def failures_markdown(location: str, report: dict[str, Any], consequence: str) -> str:
    """A warning listing each failed expectation with its observed value. Paths, expectations
    and values come from the data: they show as text (`md_text`), never as markdown."""
    lines = [
        f"# Data contract failed: {md_text(location, line=True)}",
        "",
        f"{len(report['failed'])} expectation(s) failed over {report['checked']} checked file(s)."
        f" {consequence}",
        "",
        "| file | expectation | observed |",
        "|---|---|---|",
    ]
    for failure in report["failed"]:
        cells = [failure["path"], failure["expectation"], _compact(failure["observed"])]
        lines.append("| " + " | ".join(md_text(c, line=True) for c in cells) + " |")
    lines += ["", "Run `dsstar contracts accept <data>` to adopt today's data as the contract."]
    return "\n".join(lines)


def render_html(location: str, report: dict[str, Any]) -> str:
    """One static page: every file's status, statistics and failed expectations."""
    rows = []
    failed_by_file: dict[str, list[dict[str, Any]]] = {}
    for failure in report["failed"]:
        failed_by_file.setdefault(str(failure["path"]).split("#")[0], []).append(failure)
    for item in report.get("files", []):
        stats = item.get("statistics") or {}
        rows.append(
            f"<tr class='{item['status']}'><td>{_e(item['path'])}</td><td>{_e(item['status'])}"
            f"</td><td>{stats.get('successful_expectations', '')}/"
            f"{stats.get('evaluated_expectations', '')}</td><td>{item['seconds']}</td></tr>"
        )
    failures = "".join(
        f"<tr><td>{_e(f['path'])}</td><td><code>{_e(f['expectation'])}</code></td>"
        f"<td><code>{_e(_compact(f['observed']))}</code></td></tr>"
        for f in report["failed"]
    )
    verdict = "failed" if report["failed"] else "passed"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>dsstar contracts: {_e(location)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}.failed{{background:#fdd}}
.validated{{background:#dfd}}</style></head><body>
<h1>Data contracts: {_e(location)}</h1>
<p>Checked {report["checked"]} file(s): <b>{verdict}</b>.
Generated {datetime.now(UTC):%Y-%m-%d %H:%M UTC} by dsstar.</p>
<h2>Files</h2><table><tr><th>file</th><th>status</th><th>expectations met</th>
<th>seconds</th></tr>{"".join(rows)}</table>
<h2>Failed expectations</h2><table><tr><th>file</th><th>expectation</th><th>observed</th></tr>
{failures or "<tr><td colspan=3>none</td></tr>"}</table></body></html>
"""


def _compact(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:297] + "..."


def _e(value: Any) -> str:
    return html.escape(str(value))
