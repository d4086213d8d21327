"""A Jupyter notebook of a finished run: every round's plan, code and output, then the answer.

Its markdown cells show the question, the plan and the route as text (`md_text`): a notebook
viewer renders markdown and HTML, and these come from a form, a model and a script."""

from __future__ import annotations

from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from dsstar.algorithm.verdict import verdict_label
from dsstar.text import md_text

__all__ = ["build_notebook", "is_raster"]


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
    (ExecResult.figures of the final script) show under it: png and jpeg inline (each with
    its bytes, base64, as 'data'), the others (svg, html, pdf: untrusted content) named
    only."""
    cells = [
        new_markdown_cell(f"# {md_text(question, line=True)}\n\nStatus: **{md_text(status)}**")
    ]
    for item in rounds:
        plan = "\n".join(
            f"{i}. {md_text(step, line=True)}" for i, step in enumerate(item["plan"], 1)
        )
        route = f"\n\nRoute that opened it: {md_text(item['route'])}" if item.get("route") else ""
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
        cells[-1].outputs += [_image(f) for f in figures or ()]
    notebook = new_notebook(cells=cells, metadata={"kernelspec": _KERNEL})
    return nbformat.writes(notebook)


_KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def _code(source: str, output: str) -> Any:
    cell = new_code_cell(source)
    if output:
        cell.outputs = [new_output("stream", name="stdout", text=output)]
    return cell


# Raster images are inert pixels, shown inline. Anything a script wrote that a viewer would
# run or render as a page (SVG, HTML) is untrusted content: named, never inlined.
_IMAGES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def _kind(name: str) -> str | None:
    return _IMAGES.get("." + name.rsplit(".", 1)[-1].lower())


def is_raster(name: str) -> bool:
    """Whether the figure `name` is shown inline (PNG, JPEG): its bytes are needed."""
    return _kind(name) is not None


def _image(figure: dict[str, Any]) -> Any:
    """A display_data output: a raster image inline (base64, as Jupyter stores it); any other
    figure as a line of plain text that names the stored file."""
    kind = _kind(figure["name"])
    if kind is None:
        said = (f"figure {figure['name']}: stored with the run, not shown here (a file a script"
                " wrote, untrusted: open it in a sandboxed viewer)")  # fmt: skip
        return new_output("display_data", data={"text/plain": said})
    return new_output("display_data", data={kind: figure["data"]},
                      metadata={"filename": figure["name"]})  # fmt: skip
