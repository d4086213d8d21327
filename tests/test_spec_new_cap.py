"""Adding a cap (a setting that bounds a run) touches the setting, the typed part of the run
spec that carries it, the one place that uses it, and the CLI's list of flags: in a copy of
the tree, a new `max_plan_steps` added that way reaches the run form, the flags of `dsstar
run`, `resume`, `report` and `bench run`, the ds-star flow's parameters (in the form's
limits, where a cap goes) and the loop, which stops there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a copy of the tree and three fresh interpreters

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

# (file, the line the new one goes after, the new line): every edit a new cap needs.
EDITS = [
    (
        "dsstar/settings.py",
        '        20, ge=1, description="Most refinement rounds after round 00 (the paper\'s M)."\n'
        "    )\n",
        "    max_plan_steps: int = Field(\n"
        '        50, ge=1, description="Most steps a plan may hold; the rounds end there."\n'
        "    )\n",
    ),
    (
        "dsstar/algorithm/runtime.py",
        '    max_rounds: int = default("max_rounds")\n',
        '    max_plan_steps: int = default("max_plan_steps")\n',
    ),
    (
        "dsstar/algorithm/loop.py",
        "        if number >= budget.max_rounds:  # M refinements made (rounds 1..M), all judged\n",
        "            return Outcome(Status.MAX_ROUNDS, plan.steps, script)\n"
        "        if len(plan.steps) >= budget.max_plan_steps:\n",
    ),
    ("dsstar/cli/run.py", '    "max_rounds",\n', '    "max_plan_steps",\n'),
]

LOOP = """
import json, sys
sys.path.insert(0, sys.argv[1])
from test_together import PROBLEM, Scripted, code
from dsstar.algorithm import loop
from dsstar.inputs.form import RunForm
from dsstar.inputs.spec import run_spec

form = RunForm(question="q", data=sys.argv[2], model="openai/m", max_plan_steps=2,
               ask_ahead=False)
spec = run_spec(form.settings(), "cap", sys.argv[2], sys.argv[2])
rt = Scripted({"planner": [f"Do thing {n}." for n in range(9)],
               "coder": [code(n) for n in range(9)],
               "verifier": ["No"] * 9, "router": ["Add Step"] * 9})
outcome = loop.rounds(rt, PROBLEM, spec.budget)
print(json.dumps({"status": outcome.status.value, "plan": outcome.plan,
                  "budget": spec.budget.max_plan_steps, "rounds": spec.budget.max_rounds}))
"""


def _copy_with_a_new_cap(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("dsstar", "flows", "tasks", "prompts"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    for name, after, new in EDITS:
        path = tree / name
        text = path.read_text(encoding="utf-8")
        assert text.count(after) == 1, f"{name}: the line to add after is not there once"
        path.write_text(text.replace(after, after + new), encoding="utf-8")
    return tree


def _python(tree: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_new_cap_reaches_the_form_the_flag_the_flow_and_the_loop(tmp_path):
    tree = _copy_with_a_new_cap(tmp_path)
    assert len({name for name, _, _ in EDITS}) == 4  # setting, spec part, use, flag

    shown = _python(tree, "-c", (
        "import json\n"
        "from dsstar.inputs.form import RunForm\n"
        "from flows.ds_star import ds_star\n"
        "limits = ds_star.parameters.definitions['Limits']['properties']\n"
        "print(json.dumps([RunForm(question='q', data='d').limits.max_plan_steps,"
        " 'max_plan_steps' in limits]))"
    ))  # fmt: skip
    assert json.loads(shown) == [None, True]  # a field of limits (unset: the setting's 50)

    for command in (["run"], ["resume"], ["report"], ["bench", "run"]):
        usage = _python(tree, "-m", "dsstar", *command, "--help")
        assert "--max-plan-steps" in usage, command

    data = tmp_path / "data"
    data.mkdir()
    ended = json.loads(_python(tree, "-c", LOOP, str(TESTS), str(data)).splitlines()[-1])
    assert ended["budget"] == 2 and ended["rounds"] == 20
    assert ended["status"] == "max_rounds" and ended["plan"] == ["Do thing 0.", "Do thing 1."]
