"""The report form: what one run of the ds-star-report flow is given. The open question, its
data and the report's required form (an outline, say), how many sub-questions each pass may
ask and how many refinement passes there are (each bounded), and every run setting, as the
run form has them (`options_form`): the report's sub-runs run with the same settings."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from dsstar.errors import UsageError
from dsstar.inputs.fields import TEXT_CHARS, VALUE_CHARS
from dsstar.inputs.form import options_form

__all__ = ["REPORT_FIELDS", "ReportForm", "report_parameters", "stored_bounds"]


def _not_empty(cls: type, value: str) -> str:
    if not value.strip():
        raise ValueError("the question is empty")
    return value


def _valid_run_id(cls: type, value: str | None) -> str | None:
    from dsstar.storage import check_run_id

    if value is not None:
        try:
            check_run_id(value)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
    return value


# The report's own fields, besides the question, data, guidelines and run id.
REPORT_FIELDS = ("sub_questions", "follow_ups", "refinements")

_ReportFields = options_form(
    "ReportForm",
    "One report of the ds-star-report flow: an open question, its data, the report's form,"
    " how far it may go, and the settings its sub-questions run with.",
    __validators__={
        "question_not_empty": field_validator("question")(_not_empty),
        "valid_run_id": field_validator("run_id")(_valid_run_id),
    },
    question=(
        str,
        Field(
            max_length=TEXT_CHARS,
            description="The open question the report answers, e.g. 'What changed in last"
            " week's payments, and why?'.",
        ),
    ),
    data=(
        str,
        Field(
            min_length=1,
            max_length=VALUE_CHARS,
            description="Folder, single file or URL (s3://bucket/prefix) holding the data files.",
        ),
    ),
    guidelines=(
        str,
        Field(
            "",
            max_length=TEXT_CHARS,
            description="What the report must look like, e.g. an outline of its sections"
            " ('1. Overview 2. Fees by scheme 3. Outliers').",
        ),
    ),
    run_id=(
        str | None,
        Field(
            None,
            max_length=VALUE_CHARS,
            description="Name a new report, or continue a stored one with its own question, data"
            " and settings. Unset: derived from the flow run, so a retry of the flow run resumes"
            " it (its finished sub-questions are not asked again).",
        ),
    ),
    sub_questions=(
        int,
        Field(5, ge=1, le=12, description="Most factoid sub-questions the first pass asks."),
    ),
    follow_ups=(
        int,
        Field(
            3,
            ge=1,
            le=8,
            description="Most complementary sub-questions each refinement pass adds where the"
            " report is thin.",
        ),
    ),
    refinements=(
        int,
        Field(
            2,
            ge=0,
            le=4,
            description="Refinement passes: a reviewer reads the draft, its sub-questions are"
            " answered, the report is rewritten (0: the first draft is the report).",
        ),
    ),
)


class ReportForm(_ReportFields):  # type: ignore[misc, valid-type]
    """One report of the ds-star-report flow: an open question, its data, the report's form,
    how far it may go, and the settings its sub-questions run with (in the sections of a
    run form, or by name)."""

    _kept: ClassVar[frozenset[str]] = frozenset({"guidelines"})

    def with_run_id(self, run_id: str) -> ReportForm:
        """This form with `run_id` as its report's run id."""
        return self.model_copy(update={"run_id": run_id})


def report_parameters(form: Any) -> dict[str, Any]:
    """The flow's keyword arguments of a report form: what is set, grouped as the form is
    (unset fields and empty sections left out)."""
    return form.parameters()


def stored_bounds(record: dict[str, Any]) -> dict[str, Any]:
    """A stored report's bounds (run.json's `report`), to resume or replay it as it was
    started: only the report's own fields (a record is anyone's text; the form checks their
    values, and the settings are judged apart: `dsstar.inputs.stored`)."""
    bounds = record.get("report")
    if not isinstance(bounds, dict):
        return {}
    return {name: bounds[name] for name in REPORT_FIELDS if bounds.get(name) is not None}
