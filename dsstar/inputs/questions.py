"""Question sets for the nightly batch: a YAML list of questions with their data roots.

- question: Which region had the highest revenue yesterday?
  data: ../examples/sales          # relative paths are relative to this file
  guidelines: "Answer as '<region>, <manager>'."
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from dsstar.errors import UsageError
from dsstar.locations import is_remote, local_path, normalize_location

__all__ = ["PROJECT_DIR", "Question", "load_questions"]

# The folder that holds the dsstar package: in a checkout, the one with deployments/ (where
# `dsstar serve` finds its question sets); installed, site-packages.
PROJECT_DIR = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Question:
    question: str
    data: str
    guidelines: str = ""


def load_questions(path: str | Path) -> list[Question]:
    """Read and validate a question set. Raises UsageError with the entry at fault."""
    path = Path(path).expanduser()
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"question set {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"question set {path} is not valid YAML: {exc}") from exc
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"question set {path} must be a non-empty list of questions")
    questions = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not entry.get("question") or not entry.get("data"):
            raise UsageError(f"{path}, entry {number}: needs 'question' and 'data'")
        data = str(entry["data"])
        if not is_remote(data) and not local_path(data).is_absolute():
            data = str(path.parent / local_path(data))  # relative to the question set
        questions.append(
            Question(
                str(entry["question"]), normalize_location(data), str(entry.get("guidelines") or "")
            )
        )
    return questions
