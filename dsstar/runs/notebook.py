"""A Jupyter notebook of a finished run: every round's plan, code and output, then the answer."""

from __future__ import annotations

import base64
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from dsstar.algorithm.verdict import verdict_label

__all__ = ["build_notebook"]


def build_notebook(
    *,
    question: str,
    rounds: list[dict[str, Any]],
    solution: str | None,
    answer: str | None,
    status: str,
    figures: list[dict[str, Any]] | None = None,
) -> str:
    """The notebook as JSON text. `rounds` hold plan, code, output, verdict and route.
    Without a `solution` (a person stopped the run) there is no final section. `figures`
    (ExecResult.figures of the final script) show under it: png, jpeg and svg ones."""
    cells = [new_markdown_cell(f"# {question}\n\nStatus: **{status}**")]
    for item in rounds:
        plan = "\n".join(f"{i}. {step}" for i, step in enumerate(item["plan"], 1))
        route = f"\n\nRoute that opened it: {item['route']}" if item.get("route") else ""
        verdict = verdict_label(item.get("verdict"))
        cells.append(
            new_markdown_cell(
                f"## Round {item['number']:02d}{route}\n\n{plan}\n\nVerdict: {verdict}"
            )
        )
        cells.append(_code(item["code"], item["output"]))
    if solution is not None:
        cells.append(new_markdown_cell("## Final solution"))
        cells.append(_code(solution, answer or ""))
        cells[-1].outputs += [_image(f) for f in figures or () if _kind(f["name"])]
    notebook = new_notebook(cells=cells, metadata={"kernelspec": _KERNEL})
    return nbformat.writes(notebook)


_KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def _code(source: str, output: str) -> Any:
    cell = new_code_cell(source)
    if output:
        cell.outputs = [new_output("stream", name="stdout", text=output)]
    return cell


_IMAGES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
           ".svg": "image/svg+xml"}  # fmt: skip


def _kind(name: str) -> str | None:
    return _IMAGES.get("." + name.rsplit(".", 1)[-1].lower())


def _image(figure: dict[str, Any]) -> Any:
    """A display_data output: base64 for raster images, text for SVG (as Jupyter stores them)."""
    kind, data = _kind(figure["name"]), figure["data"]
    if kind == "image/svg+xml":
        data = base64.b64decode(data).decode("utf-8", errors="replace")
    return new_output("display_data", data={kind: data}, metadata={"filename": figure["name"]})
