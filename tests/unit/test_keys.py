"""dsstar.keys names every stored object: its LAYOUT (the docs' storage page) covers each key
its functions make, and no other module of the product spells a key by hand."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from dsstar import keys

REPO = Path(__file__).resolve().parents[2]

# What the functions are called with in these tests, by parameter name. An object's `name`
# is any name: its key must fall in a folder LAYOUT lists, whatever the name.
ANY = "\N{WHITE SQUARE}"
SAMPLES = {
    "run_id": "20261121-193000-3fa2c1",
    "number": 7,
    "name": ANY,
    "path": "sub/orders.csv",
    "label": "coder 01",
    "request": "9f2c",
    "location": "/data/sales",
    "digest": "d41d8c",
    "sha256": "e3b0c4",
    "config": "c0ffee",
    "folder": keys.round_folder(7),
}
# Names that make a part of a key, not a key: covered through the functions that use them.
PARTS = {"round_key", "analysis_key", "root_key", "in_run", "analysis_glob"}
TOP = {pattern.split("/", 1)[0] for pattern, _ in keys.LAYOUT}  # runs, contracts, catalog...


def _segments(pattern: str) -> tuple[list[re.Pattern[str]], bool]:
    """A LAYOUT pattern as one regex per path segment, and whether it ends in ... (open)."""
    parts = pattern.split("/")
    open_ = parts[-1] == "..."
    fixed = parts[:-1] if open_ else parts
    return [re.compile(re.sub(r"<[^>]+>", "[^/]+", re.escape(p))) for p in fixed], open_


def _covered(key: str, folder: bool) -> bool:
    """Whether `key` is an object LAYOUT lists (or, for a folder, the folder of some)."""
    parts = key.split("/")
    for pattern, _ in keys.LAYOUT:
        fixed, open_ = _segments(pattern)
        if not folder and len(parts) < len(fixed) + open_:
            continue  # an object is a whole pattern (below an open one's folder)
        if len(parts) > len(fixed) and not open_:
            continue
        head = zip(fixed, parts[: len(fixed)], strict=False)
        if all(ANY in part or regex.fullmatch(part) for regex, part in head):
            return True
    return False


def _absolute(key: str) -> str:
    """Keys within a run's folder are checked where they land: under runs/<run_id>/."""
    return key if key.split("/", 1)[0] in TOP else keys.in_run(SAMPLES["run_id"], key)


def _made() -> dict[str, tuple[str, bool]]:
    """Every public name of dsstar.keys but the parts: the key it makes and whether it is a
    folder."""
    made = {}
    for name in keys.__all__:
        value = getattr(keys, name)
        if name in PARTS or name == "LAYOUT":
            continue
        if isinstance(value, str):  # a constant: a folder or a run's run.json
            made[name] = (_absolute(value), value != keys.RUN_RECORD)
            continue
        args = [SAMPLES[p] for p in inspect.signature(value).parameters]
        made[name] = (_absolute(value(*args)), name.endswith("_folder"))
    return made


def test_the_layout_lists_what_every_key_function_makes():
    made = _made()
    assert {"run_record", "round_object", "final_object", "output", "contract"} <= set(made)
    missing = {name: key for name, (key, folder) in made.items() if not _covered(key, folder)}
    assert not missing, f"keys not in dsstar.keys.LAYOUT: {missing}"


def test_the_coverage_check_tells_a_key_the_layout_lacks():
    assert _covered("runs/r1/rounds/07/code.py", folder=False)
    assert _covered("runs/r1/final/outputs/a/b.csv", folder=False)
    assert _covered("runs/r1/rounds/07/figures", folder=True)
    assert not _covered("runs/r1/rounds/07/figures", folder=False)
    assert not _covered("runs/r1/notes/today.txt", folder=False)
    assert not _covered("runs/r1/rounds/07/code.py/more", folder=True)


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda: keys.run_record("r1"), "runs/r1/run.json"),
        (lambda: keys.claim("r1", 2), "runs/r1/claims/000002.json"),
        (lambda: keys.reply("r1", "coder 01/x", "9f"), "runs/r1/replies/coder-01-x-9f.json"),
        (lambda: keys.round_object(3, "route.json"), "rounds/03/route.json"),
        (lambda: keys.figure(keys.round_folder(12), "a.png"), "rounds/12/figures/a.png"),
        (
            lambda: keys.analysis_object("orders.csv", "output.txt"),
            "analysis/orders.csv/output.txt",
        ),
        (lambda: keys.output("out/t.csv"), "final/outputs/out/t.csv"),
        (lambda: keys.chart("c.png"), "final/charts/c.png.json"),
        (lambda: keys.catalog_profile("s", "c"), "catalog/profiles/s/c.txt"),
    ],
)
def test_keys_are_laid_out_as_stored(call, key):
    assert call() == key


# Where a literal may name a path like a key's without being one: Prefect UI routes
# (/runs/flow-run/...), and the migration that rewrote stored URIs (a migration keeps the
# layout of its day, whatever this module says later).
ALLOWED = re.compile(r"/runs/flow-run/")
SKIPPED = {"dsstar/keys.py"}
SKIPPED_FOLDERS = ("dsstar/records/migrations/",)
KEYLIKE = re.compile(
    r"(?:^|/)(?:runs|rounds|final|analysis|claims|replies|reuse|contracts|contracts-docs"
    r"|catalog|figures|outputs|charts)/|^run\.json$"
)


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """The string literals of a module (f-strings' literal parts too), docstrings aside."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                found.append((node.lineno, node.value))
    return found


def _spelled_keys(source: str) -> list[tuple[int, str]]:
    return [
        (line, text)
        for line, text in _literals(ast.parse(source))
        if KEYLIKE.search(text) and not ALLOWED.search(text)
    ]


def test_no_module_but_keys_spells_a_storage_key():
    spelled = {}
    for folder in ("dsstar", "flows", "tasks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name in SKIPPED or name.startswith(SKIPPED_FOLDERS):
                continue
            if found := _spelled_keys(path.read_text(encoding="utf-8")):
                spelled[name] = found
    assert not spelled, f"storage keys spelled outside dsstar/keys.py: {spelled}"


def test_the_scan_finds_keys_spelled_by_hand():
    source = '''
def f(run_id, n):
    """Reads runs/<run_id>/run.json (a docstring may say so)."""
    store.read_json(f"runs/{run_id}/run.json")
    store.read_json(f"{prefix}/rounds/{n:02d}/code.py")
    save({"run.json": record})
    link = f"{base}/runs/flow-run/{n}"
'''
    assert [line for line, _ in _spelled_keys(source)] == [4, 5, 6]
