"""The catalog: profiles and descriptions kept in storage by file content. Unchanged files are
never hashed, profiled or analyzed again, by any command or run; a change re-does that file
only."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from scenarios import describe_script, fence, two_rounds

from dsstar.data.catalog import Catalog
from dsstar.data.sources import DataSource
from dsstar.storage import Store


def make_lake(root: Path) -> Path:
    (root / "a" / "b").mkdir(parents=True)
    (root / "orders.csv").write_text("id,units\n1,3\n2,5\n")
    (root / "a" / "notes.md").write_text("# Notes\nUnits are counted per day.\n")
    (root / "a" / "b" / "regions.json").write_text('{"regions": [{"code": "NE"}]}')
    return root


def same_size_change(path: Path) -> None:
    """New content of the same size: only the hash can tell."""
    text = path.read_text()
    path.write_text(text.replace("3", "4"))
    assert len(path.read_text()) == len(text)


def touch(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))


def open_catalog(tmp_path: Path, lake: Path) -> tuple[Catalog, DataSource]:
    return Catalog(Store(str(tmp_path / "storage")), str(lake)), DataSource(
        str(lake), tmp_path / "cache"
    )


def test_only_new_or_changed_files_are_hashed(tmp_path):
    lake = make_lake(tmp_path / "lake")
    catalog, source = open_catalog(tmp_path, lake)
    first = {f.path: f.sha256 for f in catalog.files(source)}
    assert catalog.hashed == 3

    catalog, source = open_catalog(tmp_path, lake)  # a later command
    assert {f.path: f.sha256 for f in catalog.files(source)} == first
    assert catalog.hashed == 0

    touch(lake / "a" / "notes.md")  # same content, new mtime: rehashed, same hash
    catalog, source = open_catalog(tmp_path, lake)
    assert {f.path: f.sha256 for f in catalog.files(source)} == first
    assert catalog.hashed == 1

    same_size_change(lake / "orders.csv")
    touch(lake / "orders.csv")
    catalog, source = open_catalog(tmp_path, lake)
    now = {f.path: f.sha256 for f in catalog.files(source)}
    assert catalog.hashed == 1
    assert now["orders.csv"] != first["orders.csv"]
    assert {k: v for k, v in now.items() if k != "orders.csv"} == {
        k: v for k, v in first.items() if k != "orders.csv"
    }


def test_formats_come_from_the_index_until_a_file_changes(tmp_path):
    lake = make_lake(tmp_path / "lake")
    path = lake / "orders.csv"
    catalog, source = open_catalog(tmp_path, lake)
    assert {f.path: f.format for f in catalog.files(source)}["orders.csv"] == "csv"

    # JSON of the same size under the same mtime: a warm listing reads no file, so the
    # indexed format stands (as the indexed hash does)...
    stat, size = path.stat(), path.stat().st_size
    path.write_text(('{"id": [1, 2]}' + " " * size)[:size])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    catalog, source = open_catalog(tmp_path, lake)
    assert {f.path: f.format for f in catalog.files(source)}["orders.csv"] == "csv"
    assert catalog.hashed == 0

    touch(path)  # ...until the file's mtime moves: then it is read and hashed again
    catalog, source = open_catalog(tmp_path, lake)
    formats = {f.path: f.format for f in catalog.files(source)}
    assert formats == {"orders.csv": "json", "a/notes.md": "markdown", "a/b/regions.json": "json"}
    assert catalog.hashed == 1


def test_profiles_are_computed_once_per_content(tmp_path):
    lake = make_lake(tmp_path / "lake")
    computed: list[list[str]] = []

    def compute(files):
        computed.append([f.path for f in files])
        return {f.path: f"profile of {f.path} {f.sha256[:8]}" for f in files}

    catalog, source = open_catalog(tmp_path, lake)
    first = catalog.profiles(catalog.files(source), compute)
    assert computed == [["a/b/regions.json", "a/notes.md", "orders.csv"]]

    catalog, source = open_catalog(tmp_path, lake)
    assert catalog.profiles(catalog.files(source), compute) == first
    assert len(computed) == 1  # nothing re-profiled

    same_size_change(lake / "orders.csv")
    touch(lake / "orders.csv")
    (lake / "a" / "notes.md").unlink()
    catalog, source = open_catalog(tmp_path, lake)
    now = catalog.profiles(catalog.files(source), compute)
    assert computed[1:] == [["orders.csv"]]
    assert set(now) == {"a/b/regions.json", "orders.csv"}
    assert now["orders.csv"] != first["orders.csv"]


def dsstar(*args: str, **env: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip


def describe(lake: Path, *flags: str, **env: str) -> list[dict]:
    """`dsstar describe --json` of `lake`, with `env` over this process's environment."""
    done = dsstar("describe", "--data", str(lake), "--json", *flags, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["files"]


def stored_profiles(storage: Path) -> dict[str, int]:
    return {
        str(p.relative_to(storage)): p.stat().st_mtime_ns
        for p in (storage / "catalog" / "profiles").rglob("*.txt")
    }


@pytest.mark.slow  # a whole run (CLI or flow): not in the quick tier
def test_describe_offline_profiles_each_file_once(env, tmp_path):
    lake = make_lake(tmp_path / "lake")
    storage = Path(env["DSSTAR_STORAGE"])
    first = describe(lake, "--offline")
    written = stored_profiles(storage)
    assert len(written) == 3
    assert "units" in next(f for f in first if f["path"] == "orders.csv")["description"]

    assert describe(lake, "--offline") == first
    assert stored_profiles(storage) == written  # nothing was profiled (or written) again

    done = dsstar("retrieve", "--data", str(lake), "-q", "units per day", "--offline", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"][0]["path"] == "a/notes.md"
    assert stored_profiles(storage) == written

    (lake / "a" / "notes.md").write_text("# Notes\nUnits are counted per week now.\n")
    describe(lake, "--offline")
    now = stored_profiles(storage)
    assert len(now) == 4 and {k: now[k] for k in written} == written


@pytest.mark.slow  # a whole run (CLI or flow): not in the quick tier
def test_descriptions_are_reused_with_no_prefect_api_and_only_changed_files_reanalyzed(
    env, llm, tmp_path
):
    llm.default("analyzer", describe_script)
    lake = make_lake(tmp_path / "lake")
    first = describe(lake)
    assert len(llm.calls("analyzer")) == 3

    # Every file in the catalog: describe answers from it, with no server or flow run.
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}/api"
    llm.reset().default("analyzer", describe_script)
    assert describe(lake, PREFECT_API_URL=nowhere) == first
    assert llm.calls() == []  # warm: not one LLM call

    touch(lake / "a" / "notes.md")  # same bytes: the content key still matches
    assert describe(lake) == first
    assert llm.calls() == []

    same_size_change(lake / "orders.csv")
    touch(lake / "orders.csv")
    now = describe(lake)
    calls = llm.calls("analyzer")
    assert len(llm.calls()) == len(calls) == 1
    assert "data/orders.csv" in json.dumps(calls[0]["messages"])
    changed = next(f for f in now if f["path"] == "orders.csv")
    assert "4" in changed["description"]


@pytest.mark.slow
def test_a_run_after_describe_analyzes_nothing(env, llm, sales):
    llm.default("analyzer", describe_script)
    describe(sales)
    analyzed = len(llm.calls("analyzer"))
    assert analyzed == len([p for p in sales.rglob("*") if p.is_file()])

    two_rounds(llm)
    done = dsstar("run", "--data", str(sales), "--question", "Best region?", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(llm.calls("analyzer")) == analyzed  # every description came from the catalog
    run = json.loads(done.stdout)
    record = json.loads(
        (Path(env["DSSTAR_STORAGE"]) / "runs" / run["run_id"] / "run.json").read_text()
    )
    assert record["reused_analyses"] == record["files"] == analyzed


def test_the_catalog_lives_in_s3_storage_too(env, s3, tmp_path):
    import boto3

    lake = make_lake(tmp_path / "lake")
    first = describe(lake, "--offline")
    bucket = s3.removeprefix("s3://").split("/")[0]

    def objects() -> dict[str, str]:
        listing = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="team/catalog/")
        return {o["Key"]: o["ETag"] + str(o["LastModified"]) for o in listing["Contents"]}

    written = objects()
    assert sum("/profiles/" in key for key in written) == 3
    assert sum("/roots/" in key for key in written) == 1
    assert describe(lake, "--offline") == first
    assert objects() == written


SECRET = "alice,SECRET-PAY-4417"


def every_file_script(request: dict) -> str:
    """An analyzer reply whose script prints every file under data/, not only its own."""
    return fence(
        """
import os
for folder, _, names in sorted(os.walk("data")):
    for name in sorted(names):
        path = os.path.join(folder, name)
        print("==", path)
        print(open(path, errors="replace").read())
"""
    )


@pytest.mark.slow
def test_a_description_is_made_from_its_file_alone(env, llm, tmp_path):
    """A description is reused by any lake holding the same file: it must hold nothing of
    the other files of the lake it was made in, whatever the analyzer's script reads."""
    lake_a = tmp_path / "lake_a"
    (lake_a / "hr").mkdir(parents=True)
    (lake_a / "shared").mkdir()
    (lake_a / "hr" / "pay.csv").write_text(f"name,pay\n{SECRET}\n")
    (lake_a / "shared" / "rates.csv").write_text("currency,rate\nEUR,1.08\n")
    llm.default("analyzer", every_file_script)
    described = {f["path"]: f["description"] for f in describe(lake_a)}
    assert "EUR,1.08" in described["shared/rates.csv"]
    assert "SECRET" not in described["shared/rates.csv"]
    assert "EUR" not in described["hr/pay.csv"]

    # Lake B holds only a byte-identical copy of the shared file: its description comes
    # from the catalog, and neither it nor any prompt of a run over B holds A's other file.
    lake_b = tmp_path / "lake_b"
    (lake_b / "shared").mkdir(parents=True)
    shutil.copy(lake_a / "shared" / "rates.csv", lake_b / "shared" / "rates.csv")
    llm.reset().default("analyzer", every_file_script)
    llm.default("planner", lambda request: "Read the EUR rate from rates.csv.")
    rates = "import pandas as pd\nprint(pd.read_csv('data/shared/rates.csv'))\n"
    llm.default("coder", lambda request: fence(rates))
    llm.default("verifier", lambda request: "Yes")
    llm.default("finalyzer", lambda request: fence("print('1.08')"))
    done = dsstar("run", "--data", str(lake_b), "--question", "The EUR rate?", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["answer"] == "1.08"
    assert llm.calls("analyzer") == []  # known by content and path
    assert {c["agent"] for c in llm.calls()} >= {"planner", "coder", "verifier", "finalyzer"}
    assert not [c["agent"] for c in llm.calls() if "SECRET" in json.dumps(c["messages"])]
    assert "SECRET" not in json.dumps(describe(lake_b))
