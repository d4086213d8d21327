"""Spell `flows` and `tasks` by their installed names, `dsstar.flows` and `dsstar.tasks`.

The folders stay at the top of the repository (the layout) and install under the dsstar
namespace (pyproject's package-dir), so no code may import them as top-level packages: an
installed copy has no such packages, and a source tree would load a second copy of each module.

    python scripts/namespace_imports.py           rewrite tracked and new files in place
    python scripts/namespace_imports.py --check   list what is left to rewrite; exit 1 if any

Rewritten: `from flows import x`, `flows.<module>` wherever it names a module of the folder
(imports, strings, docs), and Prefect entrypoints `flows/<module>.py:<flow>`, which become
module paths (`dsstar.flows.<module>:<flow>`). Rewritten Python files get their imports
sorted again (ruff, when installed). Running it twice changes nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("flows", "tasks")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".txt"}
_NOT_AFTER = r"(?<![\w./-])"  # not part of a longer name (dsstar.flows) or a path (a/flows)


def modules(folder: str) -> list[str]:
    """The modules and sub-packages of a top folder, longest first."""
    names = {p.stem for p in (ROOT / folder).glob("*.py")}
    names |= {p.name for p in (ROOT / folder).iterdir() if (p / "__init__.py").is_file()}
    return sorted(names - {"__init__"}, key=len, reverse=True)


def rules() -> list[tuple[re.Pattern[str], str]]:
    found = []
    for folder in FOLDERS:
        names = "|".join(map(re.escape, modules(folder)))
        found += [
            (re.compile(rf"\bfrom(\s+){folder}(\s+)import\b"), rf"from\1dsstar.{folder}\2import"),
            (re.compile(rf"{_NOT_AFTER}{folder}/({names})\.py:(\w+)"), rf"dsstar.{folder}.\1:\2"),
            (re.compile(rf"{_NOT_AFTER}{folder}\.({names})\b"), rf"dsstar.{folder}.\1"),
        ]
    return found


# What --check also reports: a bare `import flows` has no rewrite that keeps its uses working.
LEFTOVER = re.compile(rf"\b(?:from|import)\s+(?:{'|'.join(FOLDERS)})\b(?!/)")


def files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    this = Path(__file__).resolve()
    paths = [ROOT / name for name in listed if Path(name).suffix in SUFFIXES]
    return [p for p in paths if p.is_file() and p.resolve() != this]


def sort_imports(paths: list[Path]) -> None:
    """dsstar.flows and dsstar.tasks now sort among the dsstar imports (ruff's isort rule)."""
    if not paths:
        return
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "I", "--fix", "--quiet",
         *map(str, paths)],
        cwd=ROOT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        print("imports not sorted: run ruff check --select I --fix", file=sys.stderr)


def main(check: bool) -> int:
    compiled = rules()
    left, rewritten = [], []
    for path in files():
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        new = text
        for pattern, replacement in compiled:
            new = pattern.sub(replacement, new)
        for number, line in enumerate(new.splitlines(), 1):
            if LEFTOVER.search(line) and path.suffix == ".py":
                left.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
        if new == text:
            continue
        if check:
            old_lines, new_lines = text.splitlines(), new.splitlines()
            left += [
                f"{path.relative_to(ROOT)}:{number}: {old.strip()}"
                for number, (old, fresh) in enumerate(zip(old_lines, new_lines, strict=True), 1)
                if old != fresh
            ]
        else:
            path.write_text(new, encoding="utf-8", errors="surrogateescape")
            print(f"rewrote {path.relative_to(ROOT)}")
            rewritten.append(path)
    sort_imports([p for p in rewritten if p.suffix == ".py"])
    for line in left:
        print(line)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(check="--check" in sys.argv[1:]))
