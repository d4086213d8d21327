"""A format registered from outside dsstar goes through the same code paths as the built-in
ones: `tests/toy_format.py` (nothing under dsstar/ knows it) gets its `.toy` files detected,
profiled in the sandbox, stored in the catalog, read for a data contract in the bounded
reader, and described by `dsstar describe`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import forked_cli
import pytest

from dsstar.data.catalog import Catalog
from dsstar.data.contracts import TABULAR_FORMATS, create_contract
from dsstar.data.formats import Format, by_name, register, unregister
from dsstar.data.profiler import FORMATS, detect_format, profile_files
from dsstar.data.sources import DataSource
from dsstar.storage import Store

TESTS = Path(__file__).parent
VISITS = "city=Oslo; visits=3\ncity=Lima; visits=5; rainy=yes\ncity=Pune; visits=8\n"


@pytest.fixture
def toy():
    """The toy format, registered as its module does when imported; removed afterwards."""
    import toy_format

    yield register(toy_format.TOY)
    unregister("toy")


@pytest.fixture
def lake(tmp_path) -> Path:
    root = tmp_path / "lake"
    root.mkdir()
    (root / "visits.toy").write_text(VISITS)
    (root / "orders.csv").write_text("id,units\n1,3\n")
    return root


def test_without_its_module_a_toy_file_is_plain_text(lake):
    assert by_name("toy") is None
    assert detect_format(str(lake / "visits.toy")) == "text"


def test_a_registered_format_is_detected_profiled_and_catalogued(toy, lake, tmp_path):
    assert FORMATS[".toy"] == "toy" and "toy" in TABULAR_FORMATS
    catalog = Catalog(Store(str(tmp_path / "storage")), str(lake))
    files = {f.path: f for f in catalog.files(DataSource(str(lake), tmp_path / "cache"))}
    assert files["visits.toy"].format == "toy"

    # Profiled in the sandbox, where dsstar cannot be imported: the module's source goes along.
    profiles = catalog.profiles(
        list(files.values()), lambda missing: profile_files(lake, [f.path for f in missing])
    )
    text = profiles["visits.toy"]
    assert text.startswith("File: visits.toy (format: toy,")
    assert "Toy records: 3 rows" in text and "Columns: city, visits, rainy" in text
    assert "id (int64)" in profiles["orders.csv"]  # the built-in formats are as before


def test_a_contract_reads_a_registered_format_in_the_bounded_reader(toy, lake, tmp_path):
    store = Store(str(tmp_path / "storage"))
    files = {
        f.path: f
        for f in Catalog(store, str(lake)).files(DataSource(str(lake), tmp_path / "cache"))
    }
    # The reader is a child process: it loads the toy module from the folder it came from.
    document = create_contract(store, str(lake), lake, files["visits.toy"])
    assert document is not None and document["format"] == "toy"
    (table,) = document["tables"]
    assert {"city", "visits", "rainy"} <= set(json.dumps(table["suite"]).split('"'))


def test_dsstar_describe_loads_the_format_module_named_in_the_setting(lake, tmp_path):
    env = {
        **os.environ,
        "DSSTAR_FORMATS": "toy_format",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "DSSTAR_STORAGE": str(tmp_path / "storage"),
        "DSSTAR_WORK_DIR": str(tmp_path / "work"),
    }
    done = forked_cli.run(
        [sys.executable, "-m", "dsstar", "describe", "--data", str(lake), "--offline", "--json"],
        capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    files = {f["path"]: f for f in json.loads(done.stdout)["files"]}
    assert files["visits.toy"]["format"] == "toy"
    assert "Columns: city, visits, rainy" in files["visits.toy"]["description"]


def test_a_registered_magic_is_tried_after_the_built_in_ones_and_before_any_name(tmp_path):
    stamp = Format("stamp", (".stamp",), magic=lambda path, head: head.startswith(b"STAMP\x00"))
    register(stamp)
    try:
        (tmp_path / "reading.csv").write_bytes(b"STAMP\x00\x01\x02")  # content beats the name
        (tmp_path / "broken.stamp").write_bytes(b"\x00\x01 damaged")  # a binary keeps its name
        (tmp_path / "db.stamp").write_bytes(b"SQLite format 3\x00" + bytes(100))
        assert detect_format(str(tmp_path / "reading.csv")) == "stamp"
        assert detect_format(str(tmp_path / "broken.stamp")) == "stamp"
        assert detect_format(str(tmp_path / "db.stamp")) == "sqlite"
    finally:
        unregister("stamp")
    assert detect_format(str(tmp_path / "reading.csv")) != "stamp"


def test_a_format_names_the_files_its_analysis_sees_besides_the_file(tmp_path):
    """A shapefile is read with its parts: a format says which (`needs`), and the analysis
    of a .shp sees those of them in the lake, and nothing else; their content keys its
    description too."""
    from dataclasses import asdict

    from dsstar.algorithm import analysis
    from dsstar.execution.sandbox import Limits, run_script
    from dsstar.inputs.spec import run_spec
    from dsstar.settings import Settings

    lister = (
        "import os\nprint(sorted(os.path.join(d, n) for d, _, ns in os.walk('data') for n in ns))"
    )

    class Calls:
        def ask(self, agent, label, messages):
            return f"```python\n{lister}\n```"

        def execute(self, label, code, files=None):
            return run_script(code, data_dir=lake, limits=Limits(timeout_s=30), files=files)

    register(Format("shape", (".shp",), needs=lambda p: [p[:-4] + ".shx", p[:-4] + ".dbf"]))
    try:
        lake = tmp_path / "lake"
        (lake / "roads").mkdir(parents=True)
        for name in ("roads/roads.shp", "roads/roads.dbf", "roads/other.csv"):
            (lake / name).write_text(f"{name}\n")
        files = {f.path: f for f in DataSource(str(lake), tmp_path / "cache").files()}
        shp = asdict(files["roads/roads.shp"])
        assert shp["needs"] == (("roads/roads.dbf", files["roads/roads.dbf"].sha256),)
        assert files["roads/other.csv"].needs == ()
        spec = run_spec(Settings(model="openai/gpt-4o-mini"), "t", str(tmp_path / "s"), lake)
        record = analysis.analyze_file(Calls(), shp, spec)
        assert record["description"] == "['data/roads/roads.dbf', 'data/roads/roads.shp']"
        other = {**shp, "needs": (("roads/roads.dbf", "0" * 64),)}
        assert analysis.config_key(other, spec) != analysis.config_key(shp, spec)
    finally:
        unregister("shape")
