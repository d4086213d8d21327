"""The nightly batch: every question of a question set, concurrently, with one analysis of
each data root shared by all the questions over it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from typing import Any

from prefect import flow, task

from dsstar.questions import Question, load_questions
from dsstar.settings import Settings
from dsstar.storage import Store, new_run_id
from tasks.agents import RunSpec

from .ds_star import analyze_files, ds_star, open_data

__all__ = ["ds_star_nightly"]


@task(name="answer", task_run_name="answer {number}")
def answer(number: int, question: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    """One question as its own ds-star flow run (a subflow), so it can be inspected alone."""
    options = {k: v for k, v in settings.items() if k not in {"model", "storage", "max_rounds"}}
    return ds_star(
        **question,
        model=settings.get("model"),
        max_rounds=settings.get("max_rounds", 20),
        storage=settings.get("storage"),
        run_id=f"{new_run_id()}-q{number}",
        options=options,
    )


@flow(name="ds-star-nightly")
def ds_star_nightly(
    questions_file: str = "deployments/questions.yaml",
    model: str | None = None,
    storage: str | None = None,
    max_rounds: int = 20,
) -> list[dict[str, Any]]:
    """Answer every question of a question set (a YAML file) against its data.

    Args:
        questions_file: YAML list of {question, data, guidelines}; relative data paths are
            relative to the file.
        model: litellm model for every agent (default: DSSTAR_MODEL on the worker).
        storage: Where artifacts go (default: DSSTAR_STORAGE on the worker).
        max_rounds: Most rounds per question.
    """
    chosen = {"model": model, "storage": storage, "max_rounds": max_rounds}
    settings = Settings(**{k: v for k, v in chosen.items() if v is not None})
    questions = load_questions(questions_file)
    share_analyses(questions, settings)
    shared = settings.model_dump(mode="json", exclude={"api_key", "database_url"})
    futures = [answer.submit(n, asdict(q), shared) for n, q in enumerate(questions, 1)]
    results = []
    for question, future in zip(questions, futures, strict=True):
        future.wait()
        if future.state.is_completed():
            results.append(future.result())
        else:  # one failed question does not sink the batch; its run.json says why
            failed = {"question": question.question, "status": "failed"}
            results.append(failed | {"error": future.state.message})
    return results


def share_analyses(questions: list[Question], settings: Settings) -> None:
    """Analyze each data root once, before the questions run: their runs then find every
    description in the content-keyed cache instead of analyzing the same files in parallel."""
    by_root: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        by_root[question.data].append(question)
    storage = Store(settings.storage).url
    for root in by_root:
        source = open_data(root, settings)
        analyze_files(
            RunSpec.from_settings(settings, f"nightly-{new_run_id()}", storage, source.mount_dir),
            source,
        )
