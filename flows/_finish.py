"""The end of a run that got through its rounds: the answer, the notebook and the final
objects stored, the summary artifact published, run.json and the ledger closed."""

from __future__ import annotations

import base64
import logging
from typing import Any

from dsstar.algorithm.answer import stated_answer
from dsstar.algorithm.runtime import Script
from dsstar.algorithm.verdict import ANSWERED, Status
from dsstar.errors import StorageError
from dsstar.execution.failure import failure_line
from dsstar.keys import FINAL, final_object
from dsstar.records.files import forget_files, read_output
from dsstar.records.record import final_objects
from dsstar.views.notebook import build_notebook, is_raster
from flows import _story as story
from flows._run import Run
from tasks.record import publish_deliverables, publish_summary

__all__ = ["finish"]


def finish(
    run: Run,
    status: Status,
    plan: list[str],
    final: Script | None,
    reused_from: str | None = None,
) -> dict[str, Any]:
    """Store the outcome and close the run; returns the run's result (`--json`). `final` is
    the finalized script; None when a person stopped the run (there is no answer then).
    `reused_from`: the earlier run (of this storage) whose solution this run reused."""
    answer = _answer(run, final)
    if final is not None and answer is None:  # it failed, or stated nothing: never an answer
        status = Status.FAILED
    notebook = build_notebook(
        question=run.record["question"],
        rounds=run.rounds,
        solution=final.code if final is not None else None,
        answer=answer,
        status=status.value,
        figures=_with_images(run, final.result.figures) if final is not None else None,
    )
    if final is not None:
        run.add_figures(FINAL, final)
    outputs = run.add_outputs(final)
    objects = final_objects(final, answer, status.value, plan, notebook)
    uris = dict(zip(objects, run.save(objects, "final"), strict=True))
    solution_uri = uris.get(final_object("solution.py"))
    run.note(
        status=status.value,
        answer=answer,
        plan=plan,
        solution_uri=solution_uri,
        reused_solution=reused_from is not None,
        reused_from=reused_from,
    )
    result = run.close(solution=final.code if final is not None else None)
    story.answered(status.value, len(run.rounds), answer, run.record.get("error"))
    links = {
        "run folder": run.store.uri(run.prefix),
        "solution": solution_uri,
        "solution's output": uris.get(final_object("output.txt")),
        "answer": uris[final_object("answer.json")],
        "notebook": uris[final_object("notebook.ipynb")],
    }
    links |= {f"output {f['name']}": f["uri"] for f in outputs}
    publish_summary(run.run_id, run.record, {k: v for k, v in links.items() if v})
    if final is not None and final.result.outputs:
        publish_deliverables(run.run_id, final.result.outputs, outputs, run.store)
    if status in ANSWERED:  # never resumed: no cached execution will read files/ again
        _forget_files(run)
    return result


def _with_images(run: Run, figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures, each PNG or JPEG with its bytes read back (base64, as the notebook shows
    them inline); the others are named there, not shown."""
    shown = []
    for figure in figures:
        if is_raster(figure["name"]) and "data" not in figure:
            data = read_output(run.store, figure)
            figure = {**figure, "data": base64.b64encode(data).decode("ascii")}
        shown.append(figure)
    return shown


def _forget_files(run: Run) -> None:
    try:
        forget_files(run.store, run.run_id)
    except StorageError as exc:  # they take room, nothing more: the answer stands
        story.say("could not delete the run's stored files: %s", exc, level=logging.WARNING)


def _answer(run: Run, final: Script | None) -> str | None:
    """The answer the final script states ("" when stated empty, see dsstar.algorithm.answer); None
    (with the reason noted) when there is none."""
    if final is None:
        return None
    if not final.result.ok:
        # One line that names the cause; the whole output is stored as final/output.txt.
        why = failure_line(final.result.output, "solution.py", final.result.exit_code)
        run.note(error=f"the final script failed: {why}")
        return None
    answer = stated_answer(final.result.stdout)
    if answer is None:  # nothing stated: stray prints are never taken for the answer
        said = "printed nothing" if not final.result.stdout.strip() else "stated no answer"
        run.note(error=f"the final script {said} (no 'FINAL ANSWER:' line): there is no answer")
    return answer
