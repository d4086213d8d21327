"""A lake with traps, end to end: the real CLI in a subprocess and a real run of the flow.
Nothing outside the data root may reach a prompt, an output or storage; long and clashing
paths must get their own analysis folders."""

from __future__ import annotations

import gzip
import json
import os
import sys
import zipfile
from pathlib import Path

import forked_cli
import pytest
from fake_llm import text_of
from scenarios import describe_script, fence, two_rounds

from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

SECRET = "TOP-SECRET-outside-the-lake-7d1f"
QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
LONG = ("seg_" + "x" * 44 + "/") * 6 + "f1.csv"  # 300 characters


@pytest.fixture
def trapped(sales: Path, tmp_path: Path) -> Path:
    """The example sales data plus a secret behind a link, a FIFO, clashing and long paths
    and archives."""
    secret = tmp_path / "outside" / "credentials.txt"
    secret.parent.mkdir()
    secret.write_text(f"password={SECRET}\n")
    (sales / "credentials.txt").symlink_to(secret)
    (sales / "shadow").symlink_to("/etc/shadow")
    os.mkfifo(sales / "pipe")
    (sales / "x").mkdir()
    (sales / "x" / "y.csv").write_text("a,b\n1,2\n")
    (sales / "x__y.csv").write_text("c,d\n3,4\n")
    (sales / LONG).parent.mkdir(parents=True)
    (sales / LONG).write_text("q,value\nQ1,10\n")
    (sales / "metrics.csv.gz").write_bytes(gzip.compress(b"metric,value\ncpu,0.5\n"))
    with zipfile.ZipFile(sales / "bundle.zip", "w") as zf:
        zf.writestr("inner/table.csv", "name,age\nann,31\n")
    return sales


@pytest.mark.timeout(300)
def test_describe_offline_cli_reads_the_lake_and_nothing_else(trapped, tmp_path):
    assert len(LONG) == 300
    env = os.environ | {"DSSTAR_WORK_DIR": str(tmp_path / "work")}
    done = forked_cli.run(
        [sys.executable, "-m", "dsstar", "describe", "--data", str(trapped), "--offline", "--json"],
        capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    files = {f["path"]: f for f in json.loads(done.stdout)["files"]}
    assert files["credentials.txt"]["error"] == "a symbolic link that leads outside the data root"
    assert files["shadow"]["error"] == "a symbolic link that leads outside the data root"
    assert files["pipe"]["error"] == "a FIFO (named pipe): not opened"
    assert files["metrics.csv.gz/metrics.csv"]["format"] == "csv"
    assert "metric (" in files["metrics.csv.gz/metrics.csv"]["description"]
    assert "age (int64)" in files["bundle.zip/inner/table.csv"]["description"]
    assert "value (int64)" in files[LONG]["description"]
    assert "a (int64)" in files["x/y.csv"]["description"]
    assert "c (int64)" in files["x__y.csv"]["description"]
    described = [f for f in files.values() if f["format"] != "skipped"]
    assert all(f["description"] and f["error"] is None for f in described)

    text = forked_cli.run(
        [sys.executable, "-m", "dsstar", "describe", "--data", str(trapped), "--offline"],
        capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert text.returncode == 0 and SECRET not in text.stdout
    assert "skipped: a FIFO (named pipe): not opened" in text.stdout


def test_a_run_over_the_lake_keeps_secrets_out_and_paths_apart(env, llm, trapped, monkeypatch):
    monkeypatch.setenv("DSSTAR_MAX_DEBUG_ATTEMPTS", "0")

    def analyzer(request):  # one script fails, so the sandboxed profiler describes that file
        if "metrics.csv.gz" in text_of(request):
            return fence("raise SystemExit('cannot read this one')")
        return describe_script(request)

    two_rounds(llm)
    llm.default("analyzer", analyzer)
    result = ds_star(question=QUESTION, data=str(trapped), run_id="t-lake")
    assert result["status"] == "verified"

    assert not any(SECRET in json.dumps(r["body"]) for r in llm.requests)
    prompts = " ".join(text_of(r) for r in llm.requests)
    assert "credentials.txt" not in prompts and "data/pipe" not in prompts
    assert f"data/{LONG}" in prompts and "data/bundle.zip/inner/table.csv" in prompts

    run_dir = Path(env["DSSTAR_STORAGE"]) / "runs" / "t-lake"
    stored = [p for p in run_dir.rglob("*") if p.is_file()]
    assert not any(SECRET in p.read_text(errors="replace") for p in stored)
    records = {
        json.loads(p.read_text())["path"]: p.parent
        for p in (run_dir / "analysis").glob("*/attempts.json")
    }
    assert {"x/y.csv", "x__y.csv", LONG, "metrics.csv.gz/metrics.csv"} <= set(records)
    assert records["x/y.csv"] != records["x__y.csv"]
    assert all(len(folder.name) <= 120 for folder in records.values())
    assert "a,b" in (records["x/y.csv"] / "output.txt").read_text()
    assert "c,d" in (records["x__y.csv"] / "output.txt").read_text()
    fallback = records["metrics.csv.gz/metrics.csv"]
    assert json.loads((fallback / "attempts.json").read_text())["source"] == "profiler"
    assert "format: csv" in (fallback / "output.txt").read_text()


def test_describe_with_the_analyzer_lists_skipped_entries_and_leaks_nothing(env, llm, trapped):
    llm.default("analyzer", describe_script)
    done = forked_cli.run(
        [sys.executable, "-m", "dsstar", "describe", "--data", str(trapped), "--json"],
        capture_output=True, text=True, timeout=280, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert not any(SECRET in json.dumps(r["body"]) for r in llm.requests)
    files = {f["path"]: f for f in json.loads(done.stdout)["files"]}
    assert files["credentials.txt"]["format"] == "skipped"
    assert files["pipe"]["error"] == "a FIFO (named pipe): not opened"
    assert "name,age" in files["bundle.zip/inner/table.csv"]["description"]
