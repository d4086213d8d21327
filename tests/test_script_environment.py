"""The scripts' environment: what generated scripts can import (in the real sandbox), what the
prompts say they can import (read from the interpreter they run in), another interpreter named
by the worker (DSSTAR_SCRIPT_PYTHON), and caches that stay inside each script's own folders."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from dsstar.algorithm import agents
from dsstar.algorithm.analysis import config_key
from dsstar.algorithm.spec import RunSpec
from dsstar.errors import ConfigError
from dsstar.execution.sandbox import Limits, pool, run_script
from dsstar.execution.sandbox import interpreter as probe
from dsstar.execution.sandbox import modes as sandbox_modes
from dsstar.inputs.form import OPTION_FIELDS, kept_out
from dsstar.inputs.spec import run_spec
from dsstar.settings import Settings

REPO = Path(__file__).resolve().parents[1]
ISOLATED = [m for m in ("bwrap", "unshare") if sandbox_modes._usable(m)]
MODES = [*ISOLATED, "none"]
LIMITS = Limits(timeout_s=120, memory_mb=2048, output_bytes=50_000, disk_mb=256)
# module each distribution of the stack is imported as
MODULES = {"numpy": "numpy", "pandas": "pandas", "scipy": "scipy", "scikit-learn": "sklearn",
           "statsmodels": "statsmodels.api", "matplotlib": "matplotlib", "seaborn": "seaborn",
           "pyarrow": "pyarrow", "openpyxl": "openpyxl", "duckdb": "duckdb",
           "lightgbm": "lightgbm", "xgboost-cpu": "xgboost"}  # fmt: skip

DRAW = """\
import importlib, logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout)  # matplotlib says when it scans fonts
for name in sys.argv[1:] or {modules!r}:
    importlib.import_module(name)
import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LinearRegression
x = np.arange(10.0).reshape(-1, 1)
fit = LinearRegression().fit(x, 3 * x.ravel())
fig, ax = plt.subplots()
ax.plot(x.ravel(), fit.predict(x), label='fit')
ax.set_title('revenue per month')
fig.savefig('chart.png')
print('backend', plt.get_backend())
print('png', open('chart.png', 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n')
print('coef', round(float(fit.coef_[0]), 3))
print('written', sorted(os.path.join(d, f) for d, _, fs in os.walk('.') for f in fs
                        if not d.startswith('./data')))
"""


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "sales.csv").write_text("region,revenue\nN,1\nS,2\n")
    return folder


# As root, mode `none` runs each script as a dedicated uid, which must reach the interpreter
# and the work folder (pytest's folders are root's alone): this test's, from the fixture below.
PLAIN: dict[str, object] = {}


@pytest.fixture(autouse=True)
def _reachable_by_the_script_uid(plain_python, open_work, monkeypatch):
    monkeypatch.setitem(PLAIN, "python", plain_python)
    monkeypatch.setitem(PLAIN, "work_root", open_work)


def run(code, data, mode, tmp_path, warm=True, python=None):
    limits = Limits(**{**vars(LIMITS), "warm": warm})
    where = {"work_root": tmp_path / "work", "python": python}
    if not sandbox_modes.isolates(mode):
        where = {"work_root": PLAIN["work_root"], "python": python or PLAIN["python"]}
    return run_script(code, data_dir=data, limits=limits, mode=mode, **where)


# -- what the prompts name -------------------------------------------------------------------


def test_the_stack_is_pinned_in_the_project():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {
        dep.split(">")[0].split("=")[0].split("[")[0].lower() for dep in project["dependencies"]
    }
    assert set(probe.SCRIPT_STACK) <= names
    lock = (REPO / "requirements.lock").read_text().lower()
    assert all(f"\n{name}==" in lock for name in probe.SCRIPT_STACK)


def test_the_prompts_name_what_the_scripts_interpreter_has(tmp_path):
    spec = run_spec(Settings(model="openai/m"), "r1", str(tmp_path), tmp_path)
    named = {item.split()[0].lower() for item in spec.libraries}
    # all of them are installed here; xgboost-cpu is named as what scripts import
    assert set(probe.SCRIPT_STACK) - {"xgboost-cpu"} | {"xgboost"} <= named
    assert not named & {"prefect", "litellm", "dsstar", "pytest", "pip", "moto", "ruff"}
    import pandas

    major_minor = ".".join(pandas.__version__.split(".")[:2])
    assert f"pandas {major_minor}" in spec.libraries
    analyzer = agents.analyzer.render(path="data/x.csv", format="csv", libraries=spec.libraries)
    coder = agents.coder.render_initial(question="q", files=[], step="s", libraries=spec.libraries)
    for prompt in (analyzer, coder):
        text = prompt[0]["content"]
        assert "scikit-learn" in text and "matplotlib" in text and "prefect" not in text
    # The libraries are part of what makes a file's description (a cached one is not reused
    # from an environment that had other libraries).
    other = RunSpec(**{**vars(spec), "libraries": ["pandas 2.2"]})
    file = {"path": "x.csv", "format": "csv"}
    assert config_key(file, spec) != config_key(file, other)


def test_which_distributions_are_named():
    """The stack dsstar installs for scripts, then what was installed on purpose (required by
    nothing else), except dsstar's own and packaging tools."""

    def dist(name, version="1.2.3", requires=()):
        return {"name": name, "version": version, "requires": list(requires)}

    found = {
        "dsstar": dist("dsstar", requires=["prefect", "pandas", "numpy", "pytest"]),
        "prefect": dist("prefect", requires=["httpx"]),
        "httpx": dist("httpx"),
        "pytest": dist("pytest"),  # an extra of dsstar's: its own
        "pandas": dist("pandas", "2.2.3", ["numpy"]),
        "numpy": dist("numpy", "2.1.0"),
        "lightgbm": dist("LightGBM", "4.5.0", ["numpy", "scipy"]),
        "scipy": dist("scipy", "1.14.1", ["numpy"]),
        "xgboost": dist("xgboost", "2.1"),
        "pip": dist("pip", "24.0"),
        "setuptools": dist("setuptools", "70.0"),
        "six": dist("six"),  # required by something: not named
        "python-dateutil": dist("python-dateutil", requires=["six"]),
    }
    assert probe._named(found) == [
        "numpy 2.1",
        "pandas 2.2",
        "scipy 1.14",
        "LightGBM 4.5",
        "python-dateutil 1.2",
        "xgboost 2.1",
    ]


def test_templates_name_the_libraries_they_are_given():
    libraries = ["numpy 2.1", "pandas 2.2", "tinylib 1.0"]
    files = [agents.FileInfo("data/a.csv", "a table")]
    said = "the Python standard library, numpy 2.1, pandas 2.2 and tinylib 1.0"
    for messages in (
        agents.analyzer.render(path="data/a.csv", format="csv", libraries=libraries),
        agents.coder.render_initial(question="q", files=files, step="s", libraries=libraries),
        agents.coder.render_next(
            question="q", files=files, plan=["a"], base_code="x", libraries=libraries
        ),
        agents.debugger.render_analyzer(path="a", code="x", error="e", libraries=libraries),
        agents.debugger.render_solution(
            question="q", code="x", error="e", files=files, libraries=libraries
        ),
    ):
        text = " ".join(messages[0]["content"].split())
        assert said in text and "openpyxl" not in text


def test_the_scripts_interpreter_is_the_workers_alone(monkeypatch):
    assert "script_python" not in OPTION_FIELDS  # no form field, no CLI option
    why = kept_out({"script_python": "/usr/bin/python3"})
    assert why and "DSSTAR_SCRIPT_PYTHON" in why[0]
    monkeypatch.setenv("DSSTAR_SCRIPT_PYTHON", "/no/such/python")
    with pytest.raises(ConfigError, match="DSSTAR_SCRIPT_PYTHON=/no/such/python"):
        run_spec(Settings(model="openai/m"), "r1", "/tmp", Path("/tmp"))


# -- in the real sandbox -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_every_library_imports_and_pyplot_draws_a_png(data, mode, warm, tmp_path, monkeypatch):
    """Each library of the stack imports; matplotlib draws headless; the caches the libraries
    write (matplotlib's font list and config, XDG caches) stay out of the working directory
    and the host's home, and no script scans the fonts again."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    result = run(DRAW.format(modules=list(MODULES.values())), data, mode, tmp_path, warm=warm)
    assert result.ok, result.output
    if warm and mode in ISOLATED:
        assert result.start == "warm", result.note
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert lines["backend"].lower() == "agg" and lines["png"] == "True"
    assert lines["coef"] == "3.0"
    # the script's own files and the chart descriptions the sandbox's prelude writes beside
    # them: no cache of any library
    assert lines["written"] == "['./.dsstar-charts.jsonl', './chart.png', './script.py']", (
        result.output
    )
    assert "generated new fontManager" not in result.output  # the shipped font list served
    assert [f["name"] for f in result.figures] == ["chart.png"]
    assert list(home.iterdir()) == []


SILENTLY_WRONG = """\
import warnings
import pandas as pd
warnings.filterwarnings("ignore")  # as notebooks often start: it must not hide what did nothing
orders = pd.read_csv("data/sales.csv")
north = orders[orders["region"] == "N"]
north["revenue"].fillna(0, inplace=True)
print("total", north["revenue"].sum())
"""


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_line_that_does_nothing_fails_and_names_itself(data, warm, tmp_path):
    """pandas 3 (Copy-on-Write) only warns that a chained assignment changed a copy: in the
    sandbox the script fails there, and its traceback names the line for the debugger. A
    warning of another kind stays a warning, and a copy changed on purpose is no error."""
    result = run(SILENTLY_WRONG, data, MODES[0], tmp_path, warm=warm)
    assert not result.ok and "total" not in result.stdout
    assert 'line 6, in <module>\n    north["revenue"].fillna(0, inplace=True)' in result.output
    assert "ChainedAssignmentError: A value is being set on a copy" in result.output
    attribute = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf.double = df.a * 2\n"
    result = run(attribute, data, MODES[0], tmp_path, warm=warm)
    assert not result.ok and "line 3" in result.output
    assert "created via a new attribute" in result.output
    fine = (
        "import warnings\nimport pandas as pd\nwarnings.warn('only a warning', FutureWarning)\n"
        "orders = pd.read_csv('data/sales.csv')\nnorth = orders[orders.region == 'N'].copy()\n"
        "north['revenue'] = north['revenue'].fillna(0)\nsub = orders[orders.revenue > 1]\n"
        "sub['revenue'] = 0\nprint('total', north['revenue'].sum(), sub['revenue'].sum())\n"
    )
    result = run(fine, data, MODES[0], tmp_path, warm=warm)
    assert result.ok and "total 1 0" in result.stdout and "FutureWarning" in result.output


BOOSTED = """\
import lightgbm as lgb
import numpy as np
import xgboost as xgb
rng = np.random.default_rng(0)
x = rng.normal(size=(400, 4))
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
light = lgb.LGBMClassifier(n_estimators=30, verbose=-1).fit(x, y)
boost = xgb.XGBClassifier(n_estimators=30, max_depth=3).fit(x, y)
print("accuracy", (light.predict(x) == y).mean(), (boost.predict(x) == y).mean())
"""


@pytest.mark.parametrize("mode", MODES)
def test_lightgbm_and_xgboost_fit_in_the_sandbox(data, mode, tmp_path):
    result = run(BOOSTED, data, mode, tmp_path)
    assert result.ok, result.output
    scores = result.stdout.split()[1:]
    assert all(float(score) > 0.9 for score in scores), result.stdout


@pytest.mark.parametrize("mode", ISOLATED)
def test_no_network_for_the_libraries(data, mode, tmp_path):
    code = (
        "import socket, pandas\n"
        "try:\n"
        "    pandas.read_csv('http://127.0.0.1:9/x.csv')\n"
        "except Exception as exc:\n"
        "    print('refused', type(exc).__name__)\n"
    )
    result = run(code, data, mode, tmp_path)
    assert result.ok and "refused" in result.stdout, result.output


@pytest.fixture(scope="module")
def other_python(plain_python, open_folder):
    """A second environment made here: a venv (no pip, so it makes in a blink) with a tiny
    distribution of its own, `tinylib` 1.4.2, and none of dsstar's stack; of a Python and in a
    folder that the scripts' own uid may reach (mode none as root runs them as one)."""
    venv = open_folder / "other"
    subprocess.run([plain_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    package = Path(site) / "tinylib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("ANSWER = 42\n")
    info = Path(site) / "tinylib-1.4.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinylib\nVersion: 1.4.2\n")
    (info / "RECORD").write_text("")
    yield str(python)
    pool.shutdown()


def test_the_prompts_name_what_another_interpreter_has(other_python, tmp_path, monkeypatch):
    monkeypatch.setenv("DSSTAR_SCRIPT_PYTHON", other_python)
    spec = run_spec(Settings(model="openai/m"), "r1", str(tmp_path), tmp_path)
    assert spec.script_python == other_python
    assert "tinylib 1.4" in spec.libraries
    assert not any(name.startswith(("pandas", "numpy")) for name in spec.libraries)
    coder = agents.coder.render_initial(question="q", files=[], step="s", libraries=spec.libraries)
    assert "tinylib 1.4" in coder[0]["content"] and "pandas" not in coder[0]["content"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_scripts_run_in_another_interpreter(other_python, data, mode, warm, tmp_path):
    code = (
        "import sys, tinylib\n"
        "print(tinylib.ANSWER, sys.prefix)\n"
        "print(open('data/sales.csv').read().split()[0])\n"
        "try:\n"
        "    import pandas\n"
        "except ImportError:\n"
        "    print('no pandas here')\n"
    )
    result = run(code, data, mode, tmp_path, warm=warm, python=other_python)
    assert result.ok, result.output
    if warm and mode in ISOLATED:
        assert result.start == "warm", result.note
    venv = str(Path(other_python).parent.parent)
    assert result.stdout.split() == ["42", venv, "region,revenue", "no", "pandas", "here"]
    # Its folders are visible read-only, like dsstar's own.
    write = f"open({venv + '/x'!r}, 'w')"
    if mode in ISOLATED:
        denied = run(write, data, mode, tmp_path, warm=warm, python=other_python)
        assert not denied.ok and "Read-only file system" in denied.output


def test_a_run_in_another_interpreter_tells_and_uses_its_libraries(
    other_python, llm, sales, tmp_path, monkeypatch
):
    """The whole algorithm (local runtime) with DSSTAR_SCRIPT_PYTHON set: the analyzer's and
    the coder's prompts name what that environment has, and the scripts import it."""
    from fake_llm import text_of
    from scenarios import fence

    from dsstar.algorithm import steps
    from dsstar.algorithm.local import LocalRuntime
    from dsstar.data.sources import DataSource
    from dsstar.execution import scratch

    monkeypatch.setenv("DSSTAR_SCRIPT_PYTHON", other_python)
    (tmp_path / "work").mkdir()
    settings = Settings(
        model="openai/gpt-4o-mini",
        api_base=llm.base_url,
        storage=str(tmp_path / "storage"),
        work_dir=tmp_path / "work",
        exec_timeout=60,
    )
    listing = "import os\nfor d, _, fs in os.walk('data'):\n    print(d, sorted(fs))\n"
    llm.default("analyzer", lambda req: fence(listing))
    llm.default("planner", lambda req: "Ask tinylib for the answer.")
    llm.default("coder", lambda req: fence("import tinylib\nprint('answer', tinylib.ANSWER)"))
    llm.default("verifier", lambda req: "Yes")
    llm.default("finalyzer", lambda req: fence("import tinylib\nprint(tinylib.ANSWER)"))
    source = DataSource(str(sales), scratch.new_dir(settings.work_dir, "env-test"))
    spec = run_spec(settings, "env-1", settings.storage, source.mount_dir)
    rt = LocalRuntime(spec, api_key="sk-x")
    solution = steps.solve(rt, "What does tinylib say?", "", source, spec)
    assert solution.final.result.stdout.strip() == "42", solution.final.result.output
    for agent in ("analyzer", "coder"):
        text = " ".join(text_of(llm.calls(agent)[0]).split())
        assert "the Python standard library and tinylib 1.4" in text, text
