"""Each default of a run setting is written once, on its field of `Settings`: the bounds that
a setting chooses (the loop's Budget, a script's Limits, the profiler's bounds) and the
parameters that stand for one (the bench flow's max_rounds, the tasks' slot_wait) take it
from there, so changing a default is one edit."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from dsstar.algorithm.context import Retrieval
from dsstar.algorithm.runtime import Budget
from dsstar.data.profiler import ProfileLimits
from dsstar.execution.sandbox import Limits
from dsstar.inputs.spec import run_spec
from dsstar.model.ceiling import Ceiling
from dsstar.settings import Settings, default

ROOT = Path(__file__).resolve().parents[2]

# (file, class or function, field or parameter) -> the setting whose default it is.
CHOSEN_BY_A_SETTING = {
    ("dsstar/algorithm/runtime.py", "Budget", "max_rounds"): "max_rounds",
    ("dsstar/algorithm/runtime.py", "Budget", "max_debug_attempts"): "max_debug_attempts",
    ("dsstar/algorithm/runtime.py", "Budget", "summarize_over_chars"): "summarize_over_chars",
    ("dsstar/algorithm/runtime.py", "Budget", "max_output_chars"): "max_output_chars",
    ("dsstar/algorithm/runtime.py", "Budget", "ask_ahead"): "ask_ahead",
    ("dsstar/execution/sandbox/types.py", "Limits", "timeout_s"): "exec_timeout",
    ("dsstar/execution/sandbox/types.py", "Limits", "memory_mb"): "exec_memory_mb",
    ("dsstar/data/profiler/isolated.py", "ProfileLimits", "file_timeout_s"): "profile_timeout",
    ("dsstar/data/profiler/isolated.py", "ProfileLimits", "file_max_bytes"): "profile_max_bytes",
    ("dsstar/data/profiler/isolated.py", "ProfileLimits", "max_chars"): "max_description_chars",
    ("dsstar/data/profiler/isolated.py", "ProfileLimits", "memory_mb"): "exec_memory_mb",
    ("dsstar/algorithm/context.py", "Retrieval", "top_k"): "top_k",
    ("dsstar/algorithm/context.py", "Retrieval", "max_document_chars"): "max_document_chars",
    ("dsstar/algorithm/context.py", "Retrieval", "context_tokens"): "context_tokens",
    ("flows/bench.py", "ds_star_bench", "max_rounds"): "max_rounds",
    ("tasks/llm.py", "ask", "slot_wait"): "slot_wait",
    ("tasks/execute.py", "execute", "slot_wait"): "slot_wait",
}


def _default_expr(path: str, holder: str, name: str) -> ast.expr:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == holder:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", "") == name:
                    assert item.value is not None, f"{holder}.{name} has no default"
                    return item.value
        if isinstance(node, ast.FunctionDef) and node.name == holder:
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults))
            defaults += node.args.defaults + node.args.kw_defaults
            for arg, value in zip(args, defaults, strict=True):
                if arg.arg == name:
                    assert value is not None, f"{holder}({name}) has no default"
                    return value
    raise AssertionError(f"no {holder}.{name} in {path}")


@pytest.mark.parametrize(("where", "setting"), sorted(CHOSEN_BY_A_SETTING.items()))
def test_a_bound_takes_its_default_from_the_setting(where: tuple[str, str, str], setting: str):
    value = _default_expr(*where)
    taken = (
        isinstance(value, ast.Call)
        and getattr(value.func, "id", "").endswith("default")
        and [ast.literal_eval(a) for a in value.args] == [setting]
    )
    assert taken, f"{where}: its default is written again ({ast.unparse(value)})"


def test_the_bounds_defaults_are_the_settings():
    assert (
        Budget().max_rounds == Settings.model_fields["max_rounds"].default == default("max_rounds")
    )
    assert Limits().timeout_s == default("exec_timeout")
    assert ProfileLimits().max_chars == default("max_description_chars")


@pytest.mark.parametrize("part", [Budget, Retrieval, Ceiling], ids=lambda p: p.__name__)
def test_a_spec_part_filled_by_name_is_named_as_its_settings(part):
    # run_spec fills these field by field from the settings of the same names:
    # a new field of one of them is a new setting's value without a further edit there.
    assert {f.name for f in fields(part)} <= set(Settings.model_fields)
    spec = run_spec(
        Settings(model="openai/m", max_rounds=3, top_k=5, max_tokens=99), "r", "/tmp", Path("/tmp")
    )
    assert (spec.budget.max_rounds, spec.retrieval.top_k, spec.ceiling.max_tokens) == (3, 5, 99)
