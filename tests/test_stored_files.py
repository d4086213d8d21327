"""The files a script wrote are stored once and referred to (dsstar.records.files): a cached
execution carries no bytes, a round's tables are previewed and not stored, figures and
deliverables go to runs/<run_id>/files/<sha256> once by content and are copied by the
storage where they belong; old cached results are pruned (dsstar.records.prune). End to end:
a run whose every round writes a 12 MB table keeps its memory flat across rounds, is resumed
from references alone, and leaves its deliverables and figures once beside its text."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import forked_cli
import psutil
import pytest
from fake_llm import Error
from scenarios import answered, asked, describe_script

from dsstar import keys
from dsstar.algorithm.repair import delivers, holds_files, keeps_files
from dsstar.errors import StorageError
from dsstar.execution.sandbox import ExecResult
from dsstar.records.files import forget_files, read_output, store_outputs
from dsstar.records.prune import prune_cache, prune_when_due
from dsstar.records.record import figure_objects, output_entries, output_objects
from dsstar.storage import Store, Stored
from tasks.record import write_objects

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
MB = 1 << 20


def item(name: str, data: bytes, **extra) -> dict:
    return {"name": name, "bytes": len(data), "data": base64.b64encode(data).decode(), **extra}


def result_of(*outputs: dict) -> ExecResult:
    return ExecResult(True, 0, "ok", False, 0.1, False, "none", outputs=list(outputs))


def test_only_figures_and_deliverables_are_stored_once_by_content(tmp_path):
    store = Store(str(tmp_path / "store"))
    table = b"x\n" + b"0.5\n" * 1000
    chart = {"type": "bar"}
    result = result_of(item("t.csv", table, preview={"shape": [1000, 1]}),
                       item("a.png", PNG, chart=chart), item("b/again.png", PNG))  # fmt: skip
    kept = store_outputs(result, store, "r1", everything=False)
    digest = hashlib.sha256(PNG).hexdigest()
    assert [sorted(o) for o in kept.outputs] == [
        ["bytes", "name", "preview", "sha256"],
        ["bytes", "chart", "key", "name", "sha256"],
        ["bytes", "key", "name", "sha256"],
    ]
    assert kept.outputs[1]["key"] == kept.outputs[2]["key"] == f"runs/r1/files/{digest}"
    assert store.listdir("runs/r1/files") == [digest]  # a round's table is not stored
    assert kept.outputs[0]["sha256"] == hashlib.sha256(table).hexdigest()
    assert len(json.dumps(kept.to_dict())) < 1000  # what Prefect caches: references only
    final = store_outputs(result, store, "r1", everything=True)
    assert store.read_bytes(final.outputs[0]["key"]) == table
    assert read_output(store, final.outputs[1]) == PNG
    assert kept.figures == kept.outputs[1:]


def test_references_are_copied_by_the_storage_and_read_back_bounded(tmp_path):
    store = Store(str(tmp_path / "store"))
    final = store_outputs(result_of(item("out.csv", b"a\n1\n"), item("c.png", PNG)), store,
                          "r2", everything=True)  # fmt: skip
    objects = output_objects(final) | figure_objects("rounds/00", final)
    assert all(isinstance(value, Stored) for value in objects.values())
    relative = {keys.in_run("r2", key): value for key, value in objects.items()}
    write_objects.fn("final", store.url, relative)
    root = tmp_path / "store" / "runs" / "r2"
    outputs = root / "final" / "outputs"
    assert (outputs / "out.csv").read_bytes() == b"a\n1\n"
    assert (root / "rounds/00/figures/c.png").read_bytes() == PNG
    entries = output_entries(final, store.uri)
    assert entries[0]["sha256"] == hashlib.sha256(b"a\n1\n").hexdigest()
    (root / "files" / final.outputs[1]["sha256"]).write_bytes(PNG * 2)  # not what was stored
    with pytest.raises(StorageError, match="holds more than"):
        read_output(store, final.outputs[1])
    forget_files(store, "r2")
    assert not (root / "files").exists() and (outputs / "c.png").read_bytes() == PNG


def test_the_final_script_and_its_repairs_deliver_and_no_other():
    assert delivers("execute final") and delivers("execute final #2")
    assert not delivers("execute r03") and not delivers("execute final-ish")
    assert not delivers("execute reuse") and not delivers("execute r01 #1")


def test_files_that_may_be_delivered_are_kept_whole(tmp_path):
    """Besides the final script's: an earlier solution run again (accepted, it is the final
    script) and a round whose script states the answer already (the finalyzer may return it
    unchanged, its run then the final run); a round that states none keeps its figures."""
    stated = "rows: 12\nFINAL ANSWER: 12\n"
    assert keeps_files("execute final", "") and keeps_files("execute reuse", "12\n")
    assert keeps_files("execute r00", stated) and keeps_files("execute r02 #1", stated)
    assert keeps_files("execute r01", "**FINAL ANSWER:** Northeast\n")
    assert not keeps_files("execute r01", "rows: 12\n") and not keeps_files("execute r01", "12")
    assert not keeps_files("execute analysis", stated)
    table = item("t.csv", b"a\n1\n")
    assert holds_files(result_of(table))  # in memory: a local run's result
    store = Store(str(tmp_path / "store"))
    assert holds_files(store_outputs(result_of(table), store, "r1", everything=True))
    assert not holds_files(store_outputs(result_of(table), store, "r1", everything=False))


def test_copies_and_bounded_reads_on_s3(s3):
    store = Store(s3)
    store.write_bytes("runs/x/files/abc", PNG)
    store.copy("runs/x/files/abc", "runs/x/final/outputs/a.png")
    assert store.read_bytes("runs/x/final/outputs/a.png", most=len(PNG)) == PNG
    with pytest.raises(StorageError, match="holds more than"):
        store.read_bytes("runs/x/final/outputs/a.png", most=10)
    assert [e.name for e in store.entries("runs/x/files")] == ["abc"]
    store.remove(["runs/x/files"], recursive=True)
    assert store.entries("runs/x/files") == [] and store.exists("runs/x/final/outputs/a.png")


def aged(store: Store, name: str, size: int, days: float) -> None:
    """A cached result written `days` ago (a local store)."""
    store.write_bytes(keys.cache_entry(name), b"x" * size)
    when = (datetime.now(UTC) - timedelta(days=days)).timestamp()
    os.utime(Path(store.url) / keys.cache_entry(name), (when, when))


def test_old_cached_results_are_pruned_by_age_then_size_at_most_daily(tmp_path):
    store = Store(str(tmp_path / "store"))
    for name, days in (("exec-old", 40), ("llm-old", 31), ("exec-new", 1), ("llm-newer", 0.1)):
        aged(store, name, 1000, days)
    assert prune_cache(store, 30, None, dry_run=True).removed == 2
    assert len(store.listdir(keys.CACHE)) == 4
    pruned = prune_when_due(store, 30, None)
    assert (pruned.removed, pruned.freed, pruned.kept) == (2, 2000, 2)
    assert store.listdir(keys.CACHE) == [".pruned.json", "exec-new", "llm-newer"]
    aged(store, "exec-old-again", 10, 90)
    assert prune_when_due(store, 30, None) is None  # pruned today already
    later = datetime.now(UTC) + timedelta(days=1, minutes=1)
    assert prune_when_due(store, 30, None, now=later).removed == 1
    pruned = prune_cache(store, 0, 1500 / MB)  # by size: the newest that fit are kept
    assert (pruned.removed, pruned.kept) == (1, 1) and store.exists("cache/llm-newer")
    assert prune_when_due(store, 0, None) is None  # no bound: nothing to do


def test_prune_cache_says_what_it_deleted(tmp_path):
    store = Store(str(tmp_path / "store"))
    aged(store, "exec-a", 2000, 10)
    aged(store, "exec-b", 3000, 1)
    env = {**os.environ, "DSSTAR_STORAGE": store.url}
    command = [sys.executable, "-m", "dsstar", "runs", "prune-cache", "--older-than", "7", "--json"]
    done = forked_cli.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"dry_run": False, "removed": 1, "freed": 2000,
                                       "kept": 1, "held": 3000}  # fmt: skip
    assert store.listdir(keys.CACHE) == ["exec-b"]


# -- a run whose every round writes a 12 MB table ---------------------------------------------

QUESTION = "Draw 1.5 million uniform samples, keep them as rows.parquet, and say how many."
ROUNDS = 5
WRITE = """
import numpy as np
import pandas as pd
rows = np.random.default_rng({seed}).random(1_500_000)
pd.DataFrame({{"x": rows}}).to_parquet("rows.parquet", compression=None)
open("chart.png", "wb").write({png!r})
print("wrote rows.parquet with", len(rows), "rows")
"""


def coder(seed: int) -> str:
    code = WRITE.format(seed=seed, png=PNG)
    return (
        "I'll draw the samples with a seeded generator and keep them as a Parquet table, so the"
        f" result can be checked.\n\n```python{code}```\n\nIt prints how many rows it wrote."
    )


def scripted_rounds(llm, run_rss: list[int], pid: list[int]) -> None:
    llm.default("analyzer", describe_script)
    # One router and one planner reply more, which only a run that asks ahead would ask for.
    llm.script("planner", *[f"Step {n}: draw the samples and save rows.parquet (take {n})."
                            for n in range(ROUNDS + 1)])  # fmt: skip
    llm.script("coder", *[coder(n) for n in range(ROUNDS)])
    llm.script("verifier", *["The table is saved but the step is not finished.\n\n**No**"]
               * (ROUNDS - 1), "rows.parquet holds the samples.\n\n**Yes**")  # fmt: skip
    llm.script("router", *["Add Step"] * ROUNDS)
    llm.script("finalyzer", Error(400, "scripted bad request"))

    def measure(request):
        if request["agent"] == "verifier" and pid:  # the round's script has run
            run_rss.append(psutil.Process(pid[0]).memory_info().rss)
        return None

    llm.intercept(measure)


def stored_bytes(root: Path) -> tuple[int, int]:
    """All bytes under `root`, and those under cache/."""
    total = cached = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
            cached += path.stat().st_size if path.relative_to(root).parts[0] == keys.CACHE else 0
    return total, cached


@pytest.mark.slow
@pytest.mark.timeout(600)  # two commands, five rounds: under load, near the default bound
def test_a_run_of_large_files_keeps_memory_flat_and_stores_them_once(env, llm, sales):
    run_rss: list[int] = []
    pid: list[int] = []
    scripted_rounds(llm, run_rss, pid)
    run_id = "flood"
    proc = forked_cli.popen(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", QUESTION,
         "--run-id", run_id, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
    )  # fmt: skip
    pid.append(proc.pid)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode != 0 and "scripted bad request" in err, err[-3000:]
    storage = Path(env["DSSTAR_STORAGE"])
    run = storage / "runs" / run_id

    # Memory: the rounds' 60 MB of tables passed through the run's process and stayed out.
    assert len(run_rss) == ROUNDS
    grew = (max(run_rss[1:]) - run_rss[0]) / MB
    print(f"RSS per round (MB): {[round(r / MB) for r in run_rss]}, growth {grew:.1f} MB")
    assert grew < 24, f"the run's memory grew {grew:.1f} MB over {ROUNDS} rounds"
    # Storage: the figure, once (every round saved the same one); no round's table.
    assert [p.name for p in (run / "files").iterdir()] == [hashlib.sha256(PNG).hexdigest()]
    total, cached = stored_bytes(storage)
    print(f"storage after the failed run: {total:,} bytes, cache/ {cached:,}")
    assert total < 3 * MB and cached < 2 * MB
    prompt = llm.calls("verifier")[-1]["messages"][-1]["content"]
    assert "rows.parquet (12," in prompt and "table: 1500000 rows x 1 columns" in prompt

    before = list(llm.requests)
    llm.intercept(None)
    final = WRITE.format(seed=ROUNDS - 1, png=PNG) + 'print("FINAL ANSWER: 1500000")\n'
    llm.script("finalyzer", f"The final script keeps the table.\n\n```python{final}```\n")
    command = [sys.executable, "-m", "dsstar", "resume", run_id, "--json"]
    resumed = forked_cli.run(command, capture_output=True, text=True, timeout=600,
                             env=os.environ.copy())  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert result["status"] == "verified" and result["answer"] == "1500000"
    after = llm.requests[len(before) :]
    assert answered(before) & asked(after) == set()  # the same prompts: previews were cached
    assert [r["agent"] for r in after if r["agent"] in ("coder", "verifier", "finalyzer")] == [
        "finalyzer"
    ]

    entries = {entry["name"]: entry for entry in result["outputs"]}
    assert sorted(entries) == ["chart.png", "rows.parquet"]
    for name, entry in entries.items():
        delivered = (run / "final" / "outputs" / name).read_bytes()
        assert hashlib.sha256(delivered).hexdigest() == entry["sha256"]
    for n in range(ROUNDS):  # copied from the references of cached executions
        assert (run / "rounds" / f"{n:02d}" / "figures" / "chart.png").read_bytes() == PNG
    assert not (run / "files").exists()
    total, cached = stored_bytes(storage)
    delivered = sum(entry["bytes"] for entry in entries.values())
    print(f"storage after the resumed run: {total:,} bytes ({delivered:,} delivered),"
          f" cache/ {cached:,}")  # fmt: skip
    assert total < delivered + 3 * MB and cached < 2 * MB
