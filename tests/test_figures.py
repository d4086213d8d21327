"""Figure files a script saves: kept by the sandbox within bounds (among the files it wrote),
stored with the round and, for the final script, among the answer's outputs, listed in
run.json, the notebook and `dsstar runs show`."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import forked_cli
import pytest
from scenarios import ANSWER, FINAL_ONLY_ANSWER, JOIN, LOAD, describe_script, fence

from dsstar.execution.sandbox import Limits, run_script
from dsstar.execution.sandbox.keep import collect
from dsstar.execution.sandbox.supervise import kept_outputs
from dsstar.storage import Store
from flows.ds_star import ds_star

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
SAVE_SVG = "open('trend.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/svg\"/>')\n"
SVG_BYTES = 41
SAVE_PNG = (
    "import os\nos.makedirs('charts', exist_ok=True)\n"
    f"open('charts/revenue.png', 'wb').write({PNG!r})\n"
)


def test_collect_reads_regular_files_top_level_and_one_folder_down(tmp_path):
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "notes.txt").write_text("not a figure, but a file the script wrote")
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "sub" / "b.SVG").write_text("<svg/>")
    (tmp_path / "sub" / "deeper" / "c.png").write_bytes(PNG)  # two folders down: not kept
    (tmp_path / "link.png").symlink_to(tmp_path / "a.png")
    os.link(tmp_path / "a.png", tmp_path / "hard.png")  # a.png now has two links
    (tmp_path / "solo.pdf").write_bytes(b"%PDF-1.4")
    found = collect(str(tmp_path), 8, 1 << 20)
    assert [f["name"] for f in found["outputs"]] == ["notes.txt", "solo.pdf", "sub/b.SVG"]
    assert base64.b64decode(found["outputs"][1]["data"]) == b"%PDF-1.4"
    assert found["left_out"] == [
        ["a.png", "a file with more than one link"],  # the same inode twice
        ["hard.png", "a file with more than one link"],
        ["link.png", "a symbolic link"],
        ["sub/deeper/", "a folder two levels down"],
    ]


def test_collect_and_the_host_keep_the_bounds(tmp_path):
    for i in range(5):
        (tmp_path / f"f{i}.png").write_bytes(PNG)
    assert len(collect(str(tmp_path), 3, 1 << 20)["outputs"]) == 3
    assert len(collect(str(tmp_path), 8, 2 * len(PNG))["outputs"]) == 2
    assert collect(str(tmp_path), 0, 1 << 20) == {"outputs": [], "left_out": []}
    data = base64.b64encode(PNG).decode()
    names = ("ok.png", "../up.png", "/abs.png", "a/b/c.png", "x\n.png", "y.png")
    report = {"outputs": [{"name": n, "data": data} for n in names]}
    kept = kept_outputs(report, Limits(outputs=8))
    assert [f["name"] for f in kept] == ["ok.png", "y.png"]
    assert [f["name"] for f in kept_outputs(report, Limits(outputs=1))] == ["ok.png"]
    assert kept_outputs({"outputs": [{"name": "z.png", "data": "%%"}]}, Limits()) == []


@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_run_script_returns_the_figures(tmp_path, mode, plain_python, open_work):
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.csv").write_text("a\n1\n")
    limits = Limits(timeout_s=30, warm=False)
    # Mode none as root: a Python and a work folder the script's own uid may reach.
    where = {"work_root": open_work, "python": plain_python} if mode == "none" else {}
    result = run_script(SAVE_SVG + SAVE_PNG, data_dir=data, limits=limits, mode=mode,
                        **{"work_root": tmp_path, **where})  # fmt: skip
    assert result.ok, result.output
    assert [(f["name"], f["bytes"]) for f in result.figures] == [
        ("charts/revenue.png", len(PNG)), ("trend.svg", SVG_BYTES)
    ]  # fmt: skip
    assert base64.b64decode(result.figures[0]["data"]) == PNG
    assert json.loads(json.dumps(result.to_dict()))["outputs"] == result.outputs


def test_storage_writes_bytes_to_s3(s3):
    store = Store(s3)
    uri = store.write_bytes("runs/x/final/figures/a.png", PNG)
    assert uri == f"{s3}/runs/x/final/figures/a.png"
    assert store.fs.cat_file(uri.removeprefix("s3://")) == PNG


@pytest.mark.slow
def test_a_run_keeps_the_figures_its_scripts_saved(env, llm, sales):
    llm.default("analyzer", describe_script)
    llm.script("planner", "Load the orders.", "Join the best region with its manager.")
    llm.script("coder", fence(SAVE_SVG + LOAD), fence(JOIN))
    llm.script("verifier", "No", "Yes")
    llm.script("router", "Add Step")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER + SAVE_PNG + SAVE_SVG))
    result = ds_star(question="Best region and its manager?", data=str(sales), run_id="t-figs")
    assert result["status"] == "verified" and result["answer"] == ANSWER

    root = Path(env["DSSTAR_STORAGE"]) / "runs" / "t-figs"
    assert (root / "rounds/00/figures/trend.svg").read_text().startswith("<svg")
    assert not (root / "rounds/01/figures").exists()
    assert (root / "final/outputs/charts/revenue.png").read_bytes() == PNG
    assert (root / "final/outputs/trend.svg").exists()
    record = json.loads((root / "run.json").read_text())
    listed = {(f["where"], f["name"], f["bytes"]) for f in record["saved_figures"]}
    assert listed == {("rounds/00", "trend.svg", SVG_BYTES), ("final", "trend.svg", SVG_BYTES),
                      ("final", "charts/revenue.png", len(PNG))}  # fmt: skip
    notebook = json.loads((root / "final/notebook.ipynb").read_text())
    outputs = notebook["cells"][-1]["outputs"]
    assert base64.b64decode(outputs[1]["data"]["image/png"]) == PNG
    svg = outputs[2]["data"]  # untrusted content: named, never inlined as live SVG
    assert "image/svg+xml" not in svg and "trend.svg" in "".join(svg["text/plain"])

    def show(*args: str) -> str:
        done = forked_cli.run([sys.executable, "-m", "dsstar", "runs", "show", "t-figs", *args],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "400"})  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = show()
    assert "── saved figures ─" in out
    assert (
        f"final: charts/revenue.png ({len(PNG)} bytes) {root}/final/outputs/charts/revenue.png"
        in out
    )
    assert f"rounds/00: trend.svg ({SVG_BYTES} bytes) {root}/rounds/00/figures/trend.svg" in out
    report = json.loads(show("--json"))
    assert {f["uri"] for f in report["saved_figures"]} == {
        f"{root}/rounds/00/figures/trend.svg", f"{root}/final/outputs/trend.svg",
        f"{root}/final/outputs/charts/revenue.png",
    }  # fmt: skip
    assert json.loads(show("--round", "0", "--json"))["figures"] == [
        f"{root}/rounds/00/figures/trend.svg"
    ]
