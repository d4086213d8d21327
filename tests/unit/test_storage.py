"""The artifact store on a local folder, and the run layout helpers."""

from __future__ import annotations

import re
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsstar.errors import StorageError
from dsstar.keys import analysis_key, round_key
from dsstar.storage import Store, new_run_id


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(str(tmp_path / "store"))


def test_text_round_trip_lands_on_disk(store: Store, tmp_path: Path) -> None:
    uri = store.write_text("runs/r1/rounds/00/code.py", "print('héllo')\n")
    assert uri == f"{tmp_path.resolve()}/store/runs/r1/rounds/00/code.py"
    assert store.read_text("runs/r1/rounds/00/code.py") == "print('héllo')\n"
    on_disk = tmp_path / "store" / "runs" / "r1" / "rounds" / "00" / "code.py"
    assert on_disk.read_text(encoding="utf-8") == "print('héllo')\n"


def test_json_round_trip(store: Store) -> None:
    data = {"plan": ["Load the CSV", "Sum revenue"], "verdict": True, "cost": 0.5, "é": None}
    store.write_json("runs/r1/run.json", data)
    assert store.read_json("runs/r1/run.json") == data
    store.write_json("runs/r1/run.json", {"overwritten": 1})
    assert store.read_json("runs/r1/run.json") == {"overwritten": 1}


def test_a_reader_never_sees_a_half_written_local_file(store: Store, tmp_path: Path) -> None:
    """Runs that share a store (a benchmark's tasks, a night's questions) read what the others
    write: a local file is replaced in one step, so a reader gets the old or the new JSON."""
    key = "contracts/lake/sales.csv.json"
    documents = [{"rows": list(range(n, n + 50_000))} for n in (0, 1)]
    store.write_json(key, documents[0])
    done = threading.Event()

    def rewrite() -> None:
        for n in range(20):
            Store(store.url).write_json(key, documents[n % 2])
        done.set()

    writer = threading.Thread(target=rewrite)
    writer.start()
    seen = 0
    while not done.is_set():
        assert store.read_json(key)["rows"][0] in (0, 1)  # raises StorageError when torn
        seen += 1
    writer.join()
    assert seen > 1
    assert sorted(p.name for p in (tmp_path / "store" / "contracts" / "lake").iterdir()) == [
        "sales.csv.json"
    ]  # no temporary file is left beside it


def test_exists_and_listdir(store: Store) -> None:
    assert not store.exists("runs/r1/run.json")
    assert store.listdir("runs") == []
    store.write_text("runs/r1/run.json", "{}")
    store.write_text("runs/r1/rounds/00/code.py", "")
    store.write_text("runs/r0/run.json", "{}")
    assert store.exists("runs/r1/run.json") and store.exists("runs/r1/rounds")
    assert store.listdir("runs") == ["r0", "r1"]
    assert store.listdir("runs/r1") == ["rounds", "run.json"]


def test_uri(store: Store, tmp_path: Path) -> None:
    root = str((tmp_path / "store").resolve())
    assert store.url == root and store.uri() == root
    assert store.uri("runs/r1/run.json") == f"{root}/runs/r1/run.json"
    assert Store("memory://bucket/prefix/").uri("k") == "memory://bucket/prefix/k"


def test_relative_and_home_paths_become_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store("rel/store")
    assert store.url == str(tmp_path.resolve() / "rel" / "store")
    store.write_text("a.txt", "x")
    monkeypatch.chdir("/")
    assert store.read_text("a.txt") == "x"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Store("~/runs").url == str(tmp_path.resolve() / "runs")


def test_missing_key_raises_file_not_found(store: Store) -> None:
    with pytest.raises(FileNotFoundError):
        store.read_text("runs/nope/run.json")
    with pytest.raises(FileNotFoundError):
        store.read_json("runs/nope/run.json")


def test_write_under_a_file_raises_storage_error(store: Store) -> None:
    store.write_text("runs", "a file, not a folder")
    with pytest.raises(StorageError, match="cannot write"):
        store.write_text("runs/r1/run.json", "{}")


def test_fsspec_url_store() -> None:
    store = Store(f"memory://dsstar-test-{uuid.uuid4().hex}/prefix")
    store.write_json("runs/r1/run.json", {"ok": True})
    assert store.read_json("runs/r1/run.json") == {"ok": True}
    assert store.listdir("runs") == ["r1"]
    with pytest.raises(FileNotFoundError):
        store.read_text("runs/r2/run.json")


def test_new_run_id_format_and_uniqueness() -> None:
    ids = [new_run_id() for _ in range(200)]
    assert len(set(ids)) == len(ids)
    for run_id in ids:
        assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", run_id), run_id
    assert ids[0][:8] == datetime.now(UTC).strftime("%Y%m%d")


def test_round_and_analysis_keys() -> None:
    assert [round_key(n) for n in (0, 7, 12, 123)] == ["00", "07", "12", "123"]
    assert analysis_key("orders.csv") == "orders.csv"
    assert analysis_key("sub/dir/orders.csv").startswith("sub__dir__orders.csv~")
    assert analysis_key("x/y.csv") != analysis_key("x__y.csv") == "x__y.csv"
    long_key = analysis_key("d/" * 100 + "f.csv")
    assert len(long_key) <= 120 and long_key != analysis_key("d/" * 99 + "f.csv")
