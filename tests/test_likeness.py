"""Like files are analyzed once: files that share a shape (folder, format, schema signature)
are described by the script the analyzer wrote for one of them, run on each in the sandbox
with no model call. Calls are counted at the scripted model server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from fake_llm import text_of
from scenarios import fence

from dsstar.algorithm.likeness import _fits, for_member
from dsstar.data.shapes import column_names, group_by_shape, schema_signature
from dsstar.execution.sandbox import Limits

# --- shapes -----------------------------------------------------------------------------------

CSV_PROFILE = """File: day_01.csv (format: csv, size: 40 bytes)
rows: {rows}, columns: 3
columns:
  - day (str): nulls=0, unique=1, examples=['2024-01-01']
  - station (str): nulls=0, unique=1, examples=['s1']
  - temp (float64): nulls=0, unique=1, min={rows}.5, max=9.5
"""
JSON_PROFILE = """top-level type: dict (2 keys)
nested key paths:
  file: int e.g. {rows}
  items: list (10 items)
  items[].id: int e.g. 0
"""


def test_signature_keeps_structure_and_drops_values() -> None:
    assert schema_signature(CSV_PROFILE.format(rows=3)) == schema_signature(
        CSV_PROFILE.format(rows=7)
    )
    assert schema_signature(CSV_PROFILE.format(rows=3)) == "col day\ncol station\ncol temp"
    assert schema_signature(JSON_PROFILE.format(rows=1)) == "key file\nkey items\nkey items[].id"
    assert schema_signature("lines: 4\nheadings:\n  # Notes 1\n") == ""


def test_groups_span_partition_folders_but_not_schemas_or_formats() -> None:
    csv = CSV_PROFILE.format(rows=1)
    other = csv.replace("temp (float64)", "wind (float64)")
    files = [
        ("year=2023/day_01.csv", "csv", csv),
        ("year=2024/day_02.csv", "csv", csv),
        ("year=2024/day_03.csv", "csv", other),  # other columns: a shape of its own
        ("archive/day_04.csv", "csv", csv),  # another folder
        ("year=2024/notes_1.md", "markdown", "lines: 1\n"),
        ("year=2023/notes_2.md", "markdown", "lines: 9\n"),
        ("year=2024/broken.csv", "csv", "error: could not read"),  # no structure known
        ("year=2024/broken2.csv", "csv", "error: could not read"),
    ]
    assert group_by_shape(files) == [
        ["year=2023/day_01.csv", "year=2024/day_02.csv"],
        ["year=2024/day_03.csv"],
        ["archive/day_04.csv"],
        ["year=2024/notes_1.md", "year=2023/notes_2.md"],
        ["year=2024/broken.csv"],
        ["year=2024/broken2.csv"],
    ]


# --- a member's script ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, expected",
    [
        ('df = pd.read_csv("data/daily/day_01.csv")', 'df = pd.read_csv("data/daily/day_07.csv")'),
        ("p = './data/daily/day_01.csv'", "p = './data/daily/day_07.csv'"),
        (
            "os.path.join('data', 'daily', 'day_01.csv')",
            "os.path.join('data', 'daily', 'day_07.csv')",
        ),
        ("Path('data/daily') / 'day_01.csv'", "Path('data/daily') / 'day_07.csv'"),
        (  # a longer name that merely starts like the origin's is another file
            "a = 'data/daily/day_01.csv'; b = 'data/daily/day_01.csv.bak'",
            "a = 'data/daily/day_07.csv'; b = 'data/daily/day_01.csv.bak'",
        ),
    ],
)
def test_every_form_of_the_origin_path_names_the_member(code: str, expected: str) -> None:
    assert for_member(code, "daily/day_01.csv", "daily/day_07.csv") == expected


def test_partition_folders_are_rewritten_part_by_part() -> None:
    code = "f = os.path.join('data', 'year_2023', 'part_1', 'day_01.csv')\nprint('data/year_2023')"
    assert for_member(code, "year_2023/part_1/day_01.csv", "year_2024/part_3/day_09.csv") == (
        "f = os.path.join('data', 'year_2024', 'part_3', 'day_09.csv')\nprint('data/year_2024')"
    )


def test_a_rewritten_path_is_not_rewritten_again() -> None:
    code = "p = 'data/2023/2024.csv'\nq = os.path.join('data', '2023', '2024.csv')"
    assert for_member(code, "2023/2024.csv", "2024/2025.csv") == (
        "p = 'data/2024/2025.csv'\nq = os.path.join('data', '2024', '2025.csv')"
    )


def test_a_script_that_does_not_name_its_file_describes_no_member() -> None:
    globbing = "for p in glob.glob('data/daily/*.csv'):\n    print(p, len(open(p).read()))"
    assert for_member(globbing, "daily/day_01.csv", "daily/day_07.csv") is None


# A member's name as an attacker writes it: a string that closes the literal it is put in.
ATTACK = (
    'logs/zz" if print(open("data"+chr(47)+"hr"+chr(47)+"pay.csv").read()) else '
    '"data"+chr(47)+"logs"+chr(47)+"day_02.csv'
)


def test_a_member_name_enters_the_script_as_a_literal_never_as_code() -> None:
    code = 'import pandas as pd\npath = "data/logs/day_01.csv"\nprint(pd.read_csv(path))\n'
    rewritten = for_member(code, "logs/day_01.csv", ATTACK)
    assert rewritten == code.replace('"data/logs/day_01.csv"', repr(f"data/{ATTACK}"))
    namespace: dict = {}
    exec(rewritten.split("\n")[1], namespace)  # the assignment alone: a string, nothing run
    assert namespace["path"] == f"data/{ATTACK}"
    parts = "p = os.path.join('data', 'logs', 'day_01.csv')"
    assert for_member(parts, "logs/day_01.csv", "lo'gs/a\\b\n.csv") == (
        "p = os.path.join('data', \"lo'gs\", 'a\\\\b\\n.csv')"
    )


@pytest.mark.parametrize(
    "code",
    [
        'print(f"data/logs/day_01.csv")',  # braces in an f-string are code
        "p = b'data/logs/day_01.csv'",  # a bytes literal holds no quote unescaped
        "p = 'data/logs/day_01.csv'  # day_01.csv\nprint(f\"{p} data/logs/day_01.csv\")",
    ],
)
def test_a_name_that_cannot_be_written_where_the_path_stood_gets_its_own_call(code) -> None:
    assert for_member(code, "logs/day_01.csv", ATTACK) is None
    assert for_member(code, "logs/day_01.csv", "logs/day_02.csv") is not None


def test_an_output_naming_the_origin_or_missing_its_columns_does_not_fit() -> None:
    columns = sorted(column_names(CSV_PROFILE.format(rows=1)))
    origin = {"path": "daily/day_01.csv", "description": "day_01.csv: columns day, station, temp"}
    assert _fits("day_07.csv: columns day, station, temp", origin, "daily/day_07.csv", columns)
    assert not _fits("day_01.csv: columns day, station, temp", origin, "daily/day_07.csv", columns)
    assert not _fits("day_07.csv: columns day, station", origin, "daily/day_07.csv", columns)


class _Profile(str):
    """A profile text that counts the copies alive: what grouping holds at once."""

    live = peak = 0

    def __new__(cls, text: str) -> _Profile:
        cls.live += 1
        cls.peak = max(cls.peak, cls.live)
        return super().__new__(cls, text)

    def __del__(self) -> None:
        type(self).live -= 1


def test_grouping_a_large_lake_holds_a_bounded_number_of_profiles(tmp_path, monkeypatch):
    """However many files a lake has, planning keeps only each file's shape (and a shape's
    column names), never every profile: at most two chunks of profiles are alive at once,
    and none once the plan is made."""
    from dsstar.algorithm import likeness
    from dsstar.data.catalog import Catalog
    from dsstar.data.sources import DataFile
    from dsstar.inputs.spec import run_spec
    from dsstar.settings import Settings
    from dsstar.storage import Store

    def profile_files(_data, paths, **_):
        return {
            p: _Profile(CSV_PROFILE.format(rows=1) if p.endswith(".csv") else "") for p in paths
        }

    monkeypatch.setattr(likeness, "profile_files", profile_files)
    spec = run_spec(
        Settings(model="openai/gpt-4o-mini", max_parallel=1), "t", str(tmp_path / "s"), tmp_path
    )
    count = 5 * likeness.PROFILE_CHUNK // 2
    files = [
        DataFile(
            f"part_{i % 7}/day_{i}.{'csv' if i % 2 else 'md'}",
            40,
            "csv" if i % 2 else "markdown",
            f"{i:064x}",
        )
        for i in range(count)
    ]
    catalog = Catalog(Store(str(tmp_path / "storage")), str(tmp_path))
    plan = likeness.plan_analysis(spec, catalog, files, {}, files)
    assert (plan.groups, len(plan.analyze), len(plan.members)) == (2, 2, count - 2)
    assert plan.columns == {"part_0/day_0.md": [], "part_1/day_1.csv": ["day", "station", "temp"]}
    assert _Profile.live == 0  # the plan holds no profile
    assert 0 < _Profile.peak <= 2 * likeness.PROFILE_CHUNK < count


# --- end to end: the real CLI, the Prefect flow, the sandbox, the scripted model ---------------


def pandas_script(request: dict) -> str:
    """An analyzer reply as GPT-4o writes one: a sentence, then a script that names the
    path it was given, loads it with pandas and prints its name, shape, columns and rows."""
    path = re.search(r"`(data/[^`]+)`", text_of(request)).group(1)
    return "I'll load the file with pandas and print its structure and a few rows.\n\n" + fence(
        f"""
import pandas as pd

file_path = "{path}"
df = pd.read_csv(file_path)
print(f"File: {{file_path}}")
print(f"Shape: {{df.shape}}")
print("Columns:", ", ".join(df.columns))
print(df.head(3).to_string())
"""
    )


def dsstar(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=600, env=os.environ.copy(),
    )  # fmt: skip


def describe(lake: Path, *flags: str) -> dict:
    done = dsstar("describe", "--data", str(lake), "--json", *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def daily_lake(root: Path, count: int) -> Path:
    """`count` like CSVs (one per day, each with its own readings) and one file of the
    folder with other columns."""
    folder = root / "daily"
    folder.mkdir(parents=True)
    for day in range(1, count + 1):
        rows = "\n".join(f"d{day:03d},s{n},{day * 10 + n}.5" for n in range(3))
        (folder / f"day_{day:03d}.csv").write_text(f"day,station,temp\n{rows}\n")
    (folder / "stations.csv").write_text("station,lat,lon,elevation\ns0,1.5,2.5,100\n")
    return root


def stored_records(storage: Path) -> dict[str, dict]:
    records = [
        json.loads(p.read_text()) for p in (storage / "catalog" / "analyses").rglob("*.json")
    ]
    return {r["path"]: r for r in records}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_folder_of_like_csvs_costs_one_call_per_shape(env, llm, tmp_path):
    llm.default("analyzer", pandas_script)
    lake = daily_lake(tmp_path / "lake", 200)

    estimate = describe(lake, "--estimate")
    assert llm.calls() == []  # the estimate calls no model
    assert estimate["files"] == 201 and estimate["groups"] == 2

    files = {f["path"]: f for f in describe(lake)["files"]}
    calls = llm.calls("analyzer")
    assert len(llm.calls()) == len(calls) == estimate["calls"] == 2  # at most 5 for 200 files
    asked = {re.search(r"`data/([^`]+)`", text_of(c)).group(1) for c in calls}
    assert "daily/stations.csv" in asked  # other columns: its own call

    for day in range(1, 201):  # every member's description is its own
        text = files[f"daily/day_{day:03d}.csv"]["description"]
        assert f"File: data/daily/day_{day:03d}.csv" in text
        assert f"{day * 10 + 2}.5" in text and files[f"daily/day_{day:03d}.csv"]["error"] is None
        assert text.count("File:") == 1
    assert "elevation" in files["daily/stations.csv"]["description"]

    records = stored_records(Path(env["DSSTAR_STORAGE"]))
    origin = next(p for p in asked if p != "daily/stations.csv")
    assert records[origin]["source"] == "analyzer"
    member = (
        records["daily/day_150.csv"]
        if origin != "daily/day_150.csv"
        else records["daily/day_151.csv"]
    )
    assert member["source"] == "script" and member["script_from"] == origin  # which script made it

    # A refreshed member is described again by running the script: no model call.
    llm.reset().default("analyzer", pandas_script)
    (lake / "daily" / "day_150.csv").write_text("day,station,temp\nd150,s9,-40.5\n")
    files = {f["path"]: f for f in describe(lake)["files"]}
    assert llm.calls() == []
    assert "-40.5" in files["daily/day_150.csv"]["description"]
    assert "File: data/daily/day_150.csv" in files["daily/day_150.csv"]["description"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_script_that_globs_its_folder_describes_no_member(env, llm, tmp_path):
    """A script that reads what it finds rather than the file it was given cannot be told
    which file to describe: every like file gets its own call, as before."""

    def globbing(request: dict) -> str:
        return "Let me look at every file in the folder.\n\n" + fence(
            "import glob\nfor p in sorted(glob.glob('data/daily/*.csv')):\n"
            "    print(p, open(p).readline().strip())\n"
        )

    llm.default("analyzer", globbing)
    lake = daily_lake(tmp_path / "lake", 5)
    estimate = describe(lake, "--estimate")
    describe(lake)
    assert estimate["calls"] == 2
    assert len(llm.calls("analyzer")) == 6  # the plan's 2, then one for each of 4 members


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_like_file_the_script_fails_on_gets_its_own_call(env, llm, tmp_path):
    """Same columns, but one line too many fields: pandas' default reader stops on it, so
    the shared script fails there and that file is analyzed (and debugged) on its own."""

    def tolerant(request: dict) -> str:
        path = re.search(r"data/[\w/]+\.csv", text_of(request)).group(0)
        return "The file has malformed lines; skip them.\n\n" + fence(
            f"import pandas as pd\ndf = pd.read_csv({path!r}, on_bad_lines='skip')\n"
            f"print('File: {path}')\nprint('Columns:', ', '.join(df.columns))\n"
        )

    llm.default("analyzer", pandas_script).default("debugger", tolerant)
    lake = daily_lake(tmp_path / "lake", 5)
    (lake / "daily" / "day_999.csv").write_text("day,station,temp\nd999,s1,1.5\nd999,s2,2.5,x\n")
    files = {f["path"]: f for f in describe(lake)["files"]}
    asked = [re.search(r"`data/([^`]+)`", text_of(c)).group(1) for c in llm.calls("analyzer")]
    assert sorted(asked) == ["daily/day_001.csv", "daily/day_999.csv", "daily/stations.csv"]
    assert len(llm.calls("debugger")) == 1
    assert "File: data/daily/day_999.csv" in files["daily/day_999.csv"]["description"]
    assert "File: data/daily/day_003.csv" in files["daily/day_003.csv"]["description"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_member_named_as_code_describes_itself_alone(env, llm, tmp_path):
    """A like file whose name closes the string it is written into, then reads another
    file: the name stays a string, the script sees its own file alone, and no description
    (nor a byte-identical copy's in another lake) holds the other file's rows."""
    llm.default("analyzer", pandas_script)
    lake = tmp_path / "lake"
    (lake / "logs").mkdir(parents=True)
    (lake / "hr").mkdir()
    (lake / "hr" / "pay.csv").write_text("name,salary\nalice,SECRET-PAY-93731\n")
    for name, row in (("day_01.csv", "d1,s1,1.5"), ("day_02.csv", "d2,s2,2.5")):
        (lake / "logs" / name).write_text(f"day,station,temp\n{row}\n")
    (lake / ATTACK).write_text("day,station,temp\nd9,s9,9.5\n")

    files = {f["path"]: f for f in describe(lake)["files"]}
    assert set(files) == {"hr/pay.csv", "logs/day_01.csv", "logs/day_02.csv", ATTACK}
    for path, file in files.items():
        if path != "hr/pay.csv":
            assert "SECRET" not in file["description"], path
    assert "9.5" in files[ATTACK]["description"] and files[ATTACK]["error"] is None
    assert not [c for c in llm.calls() if "SECRET" in json.dumps(c["messages"])]

    copy = tmp_path / "copy"
    (copy / "logs").mkdir(parents=True)
    (copy / ATTACK).write_bytes((lake / ATTACK).read_bytes())
    llm.reset().default("analyzer", pandas_script)
    assert "SECRET" not in json.dumps(describe(copy))
    assert not [c for c in llm.calls() if "SECRET" in json.dumps(c["messages"])]


class SandboxCalls:
    """`Calls` with the real sandbox and no model: like files' scripts never ask one."""

    def __init__(self, data_dir: Path, limits: Limits) -> None:
        self.data_dir, self.limits, self.runs = data_dir, limits, []

    def ask(self, agent: str, label: str, messages: list) -> str:
        raise AssertionError(f"no model call for like files, got {label}")

    def execute(self, label: str, code: str, files=None):
        from dsstar.execution.sandbox import run_script

        self.runs.append(files)
        return run_script(code, data_dir=self.data_dir, limits=self.limits, files=files)


def test_each_like_file_runs_alone_over_its_own_file(tmp_path) -> None:
    """A like file's script sees that file alone under data/: one that reads another file
    of the lake, exits hard, raises or hangs costs that file alone its description."""
    from dsstar.algorithm.likeness import describe_members
    from dsstar.inputs.spec import run_spec
    from dsstar.settings import Settings

    lake = daily_lake(tmp_path / "lake", 7)
    code = (
        "import os, time, pandas as pd\n"
        "path = 'data/daily/day_001.csv'\n"
        "if path.endswith('3.csv'): print(open('data/daily/stations.csv').read())\n"
        "if path.endswith('4.csv'): os._exit(3)\n"
        "if path.endswith('5.csv'): raise ValueError('no')\n"
        "if path.endswith('6.csv'): time.sleep(60)\n"
        "df = pd.read_csv(path)\n"
        "print('File:', path, 'Columns:', ', '.join(df.columns), df['temp'].max())\n"
    )
    columns = ["day", "station", "temp"]
    origin = {
        "path": "daily/day_001.csv",
        "script": code,
        "description": "File: data/daily/day_001.csv Columns: day, station, temp 12.5",
    }
    files = [{"path": f"daily/day_00{n}.csv", "format": "csv"} for n in range(2, 8)]
    # The time bound covers the interpreter's start and pandas' import in the sandbox too,
    # which took over 3 s on a loaded machine; only the hanging file waits it out.
    spec = run_spec(
        Settings(model="openai/gpt-4o-mini", exec_timeout=8), "t", str(tmp_path / "s"), lake
    )
    calls = SandboxCalls(lake, spec.limits)
    records = describe_members(calls, files, origin, spec, columns)
    assert [r and r["description"] for r in records] == [
        "File: data/daily/day_002.csv Columns: day, station, temp 22.5",
        None,  # stations.csv is not in its view
        None,
        None,
        None,
        "File: data/daily/day_007.csv Columns: day, station, temp 72.5",
    ]
    assert calls.runs == [[f["path"]] for f in files]  # one script per file, over that file
    assert records[0]["source"] == "script" and records[0]["script_from"] == "daily/day_001.csv"


def three_folder_lake(root: Path, count: int) -> Path:
    """Three like folders of `count` CSVs each, one schema per folder."""
    for name, column in (("daily", "temp"), ("hourly", "wind"), ("weekly", "rain")):
        folder = root / name
        folder.mkdir(parents=True)
        for n in range(1, count + 1):
            rows = "\n".join(f"{name}{n:03d},s{k},{n * 10 + k}.5" for k in range(3))
            (folder / f"part_{n:03d}.csv").write_text(f"when,station,{column}\n{rows}\n")
    return root


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_describes_at_once_from_other_temp_folders_each_make_the_estimated_calls(
    env, llm, tmp_path
):
    """Two dsstar processes on one machine, with their own TMPDIR, HOME and storage, describe
    one like-file lake at the same time: the sandbox uids are the machine's, so neither
    kills the other's scripts, each profiles every file and makes the calls the estimate
    gave (counted per run at the model server), and neither reports a profile failure."""
    llm.default("analyzer", pandas_script)
    lake = three_folder_lake(tmp_path / "lake", 60)
    estimate = describe(lake, "--estimate")
    assert estimate["files"] == 180 and estimate["groups"] == 3 and estimate["calls"] == 3
    assert estimate["unprofiled"] == []

    procs = []
    for side in ("a", "b"):
        home, temp = tmp_path / side / "home", tmp_path / side / "tmp"
        home.mkdir(parents=True)
        temp.mkdir()
        (tmp_path / side / "work").mkdir()
        side_env = {
            **os.environ,
            "HOME": str(home),
            "TMPDIR": str(temp),
            "DSSTAR_STORAGE": str(tmp_path / side / "storage"),  # each describes cold
            "DSSTAR_WORK_DIR": str(tmp_path / side / "work"),
            "DSSTAR_DATABASE_URL": f"sqlite:///{tmp_path / side / 'ledger.db'}",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "dsstar", "describe", "--data", str(lake), "--json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=side_env,
            )  # fmt: skip
        )
    payloads = []
    for proc in procs:
        out, err = proc.communicate(timeout=800)
        assert proc.returncode == 0, err[-3000:]
        payloads.append(json.loads(out))

    per_run: dict[str, int] = {}
    for call in llm.calls("analyzer"):
        per_run[call["run"]] = per_run.get(call["run"], 0) + 1
    assert sorted(per_run.values()) == [estimate["calls"]] * 2, per_run
    for payload in payloads:
        assert payload["unprofiled"] == []
        assert len(payload["files"]) == 180
        assert all(f["error"] is None for f in payload["files"])
        assert not any("not profiled" in (f["description"] or "") for f in payload["files"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_files_without_a_profile_are_counted_and_listed_by_the_estimate_and_the_describe(
    env, llm, tmp_path
):
    """Tables that cannot be parsed have no shape to share: each costs a call of its own,
    which the estimate counts, and both the estimate and the describe list them with why."""

    def sizes(request: dict) -> str:
        path = re.search(r"`(data/[^`]+)`", text_of(request)).group(1)
        return "Print its size.\n\n" + fence(
            f"import os\nprint({path!r}, os.path.getsize({path!r}))"
        )

    llm.default("analyzer", sizes)
    lake = daily_lake(tmp_path / "lake", 3)
    for n in range(3):  # a footer that promises more bytes than the file has
        (lake / "daily" / f"broken_{n}.parquet").write_bytes(b"PAR1" + b"x" * 20 + b"PAR1")
    estimate = describe(lake, "--estimate")
    broken = {f"daily/broken_{n}.parquet" for n in range(3)}
    assert {item["path"] for item in estimate["unprofiled"]} == broken
    assert all("Parquet" in item["reason"] for item in estimate["unprofiled"])
    assert estimate["calls"] == 5  # the like CSVs, stations.csv, and each broken file
    text = dsstar("describe", "--data", str(lake), "--estimate")
    assert "not profiled   3 files have no offline profile" in text.stdout, text.stderr[-2000:]

    payload = describe(lake)
    assert len(llm.calls("analyzer")) == estimate["calls"]
    assert {item["path"] for item in payload["unprofiled"]} == broken
    assert all("Parquet" in item["reason"] for item in payload["unprofiled"])
