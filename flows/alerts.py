"""Alerts for the nightly questions: Prefect automations that send a night's news through
Prefect notification blocks (Slack, Teams, email, a generic webhook...).

Five automations, each created or updated by its name, so that setting them up again (a
second `dsstar serve --notify`, or `dsstar alerts`) never duplicates them:

- `dsstar: nightly answer changed`, on the event `dsstar.answer.changed` that the nightly
  batch emits when a question's answer differs from its last answer over the same data;
- `dsstar: nightly deliverable changed`, on the event `dsstar.deliverable.changed`, when the
  files a question delivers (final/outputs/: a table, a chart) differ by content from those of
  its last answered run over the same data: a file new, gone or changed;
- `dsstar: nightly question failed`, on the Failed state of a nightly question's flow run
  (every question runs as a ds-star flow run tagged `dsstar-nightly`; the batch's own Failed
  state is left out, or each failed question would alert twice);
- `dsstar: data contract broken`, on the event `dsstar.contract.broken`, one per file that
  broke its contract in a night;
- `dsstar: nightly budget reached`, on the event `dsstar.budget.reached`, once per batch
  that reached its ceiling (`dsstar serve --max-cost`): a question stopped over budget, or
  questions were skipped;
- `dsstar: report figures changed`, on the event `dsstar.report.changed` that a report
  (`dsstar report`, the ds-star-report flow: a nightly report) emits when figures it cites
  differ from those of the last report of the same question over the same data;
- `dsstar: report sub-question failing`, on the event `dsstar.report.failing`, when
  sub-questions that the last such report answered fail now.

The messages are Jinja templates that the Prefect server renders when the automation fires:
`event.payload` carries what dsstar knows (question, old and new answer, file, expectations),
`flow_run` is the question's flow run as the API has it, and `flow_run|ui_url` its page in the
Prefect UI (from the server's PREFECT_UI_URL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.objects import BlockDocument
from prefect.events.actions import SendNotification
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.exceptions import ObjectNotFound

from dsstar.errors import UsageError

__all__ = [
    "ALERT_NAMES",
    "ANSWER_CHANGED",
    "BUDGET_REACHED",
    "CONTRACT_BROKEN",
    "DELIVERABLE_CHANGED",
    "QUESTION_TAG",
    "REPORT_CHANGED",
    "REPORT_FAILING",
    "alert_automations",
    "ensure_alerts",
    "find_notification_blocks",
    "upsert_automations",
]

ANSWER_CHANGED = "dsstar.answer.changed"
DELIVERABLE_CHANGED = "dsstar.deliverable.changed"
CONTRACT_BROKEN = "dsstar.contract.broken"
BUDGET_REACHED = "dsstar.budget.reached"
REPORT_CHANGED = "dsstar.report.changed"
REPORT_FAILING = "dsstar.report.failing"
QUESTION_TAG = "dsstar-nightly"  # the tag of each nightly question's flow run

_RUN_LINE = "Run: {{ flow_run|ui_url }}"

_CHANGED_BODY = "\n".join(
    [
        "The answer to a nightly question changed.",
        "Question: {{ event.payload.question }}",
        "Data: {{ event.payload.data }}",
        "Before: {{ event.payload.previous_answer }}",
        "Now: {{ event.payload.answer }}",
        _RUN_LINE,
    ]
)

_DELIVERED_BODY = "\n".join(
    [
        "The files a nightly question delivers changed.",
        "Question: {{ event.payload.question }}",
        "Data: {{ event.payload.data }}",
        "Changed: {{ event.payload.changed }}",
        "Before: {{ event.payload.previous_run }}",
        "Now: {{ event.payload.outputs }}",
        _RUN_LINE,
    ]
)

_FAILED_BODY = "\n".join(
    [
        "A nightly question failed.",
        "Question: {{ flow_run.parameters.question }}",
        "Data: {{ flow_run.parameters.data }}",
        "Error: {{ flow_run.state.message }}",
        _RUN_LINE,
    ]
)

_BROKEN_BODY = "\n".join(
    [
        "A file broke its data contract.",
        "File: {{ event.payload.file }}",
        "Data: {{ event.payload.data }}",
        "Contract: {{ event.payload.contract }}",
        "Failed expectations:",
        "{{ event.payload.expectations }}",
        "Questions: {{ event.payload.questions }}",
        _RUN_LINE,
    ]
)


_BUDGET_BODY = "\n".join(
    [
        "A nightly batch reached its ceiling.",
        "Spent: {{ event.payload.spent }}",
        "Stopped over budget: {{ event.payload.over_budget }}",
        "Skipped: {{ event.payload.skipped }}",
        "Run: {{ event.payload.batch }}",
    ]
)


_REPORT_CHANGED_BODY = "\n".join(
    [
        "Figures a report cites changed since its last report.",
        "Question: {{ event.payload.question }}",
        "Data: {{ event.payload.data }}",
        "Changed:",
        "{{ event.payload.changes }}",
        "Before: {{ event.payload.previous_run }}",
        _RUN_LINE,
    ]
)

_REPORT_FAILING_BODY = "\n".join(
    [
        "Sub-questions of a report that its last report answered fail now.",
        "Question: {{ event.payload.question }}",
        "Data: {{ event.payload.data }}",
        "Failing:",
        "{{ event.payload.failing }}",
        "Before: {{ event.payload.previous_run }}",
        _RUN_LINE,
    ]
)


def _on(
    event: str, resource: str, name: str, description: str, **related: Any
) -> Callable[[list[SendNotification]], AutomationCore]:
    """An automation that runs `actions` once for each `event` of a `resource` id pattern."""

    def automation(actions: list[SendNotification]) -> AutomationCore:
        trigger = EventTrigger(
            expect={event},
            match={"prefect.resource.id": resource},
            posture=Posture.Reactive,
            threshold=1,
            **related,
        )
        return AutomationCore(name=name, description=description, trigger=trigger, actions=actions)

    return automation


_changed = _on(
    ANSWER_CHANGED, "dsstar.question.*", "dsstar: nightly answer changed",
    "A nightly question's answer differs from its last one over the same data.",
)  # fmt: skip
_delivered = _on(
    DELIVERABLE_CHANGED, "dsstar.question.*", "dsstar: nightly deliverable changed",
    "A file a nightly question delivers (a table, a chart) differs from its last run's.",
)  # fmt: skip
_failed = _on(
    "prefect.flow-run.Failed", "prefect.flow-run.*", "dsstar: nightly question failed",
    "A nightly question's flow run failed.",
    match_related={  # a dict is accepted and validated
        "prefect.resource.role": "tag", "prefect.resource.id": f"prefect.tag.{QUESTION_TAG}",
    },
)  # fmt: skip
_broken = _on(
    CONTRACT_BROKEN, "dsstar.contract.*", "dsstar: data contract broken",
    "A file read by a nightly question broke its data contract.",
)  # fmt: skip
_budget = _on(
    BUDGET_REACHED, "dsstar.batch.*", "dsstar: nightly budget reached",
    "A nightly batch stopped a question over budget or skipped questions.",
)  # fmt: skip


_report_changed = _on(
    REPORT_CHANGED, "dsstar.question.*", "dsstar: report figures changed",
    "Figures a report cites differ from those of its last report over the same data.",
)  # fmt: skip
_report_failing = _on(
    REPORT_FAILING, "dsstar.question.*", "dsstar: report sub-question failing",
    "Sub-questions a report's last report answered fail now.",
)  # fmt: skip


_KINDS = (
    (_changed, "dsstar: nightly answer changed: {{ event.payload.question }}", _CHANGED_BODY),
    (
        _delivered,
        "dsstar: nightly deliverable changed: {{ event.payload.question }}",
        _DELIVERED_BODY,
    ),  # fmt: skip
    (_failed, "dsstar: nightly question failed: {{ flow_run.parameters.question }}", _FAILED_BODY),
    (_broken, "dsstar: data contract broken: {{ event.payload.file }}", _BROKEN_BODY),
    (_budget, "dsstar: nightly budget reached: {{ event.payload.batch }}", _BUDGET_BODY),
    (
        _report_changed,
        "dsstar: report figures changed: {{ event.payload.question }}",
        _REPORT_CHANGED_BODY,
    ),
    (
        _report_failing,
        "dsstar: report sub-question failing: {{ event.payload.question }}",
        _REPORT_FAILING_BODY,
    ),
)

ALERT_NAMES = tuple(build([]).name for build, _, _ in _KINDS)


def alert_automations(block_ids: Sequence[UUID]) -> list[AutomationCore]:
    """Every alert automation (`ALERT_NAMES`), each sending through every block of `block_ids`."""
    automations = []
    for build, subject, body in _KINDS:
        actions = [
            SendNotification(block_document_id=block, subject=subject, body=body)
            for block in block_ids
        ]
        automations.append(build(actions))
    return automations


def find_notification_blocks(names: Sequence[str]) -> list[BlockDocument]:
    """The notification blocks named, each as `block-type-slug/name` (as `Block.load` takes
    it, e.g. `slack-webhook/team`) or as a bare name when only one notification block has
    it. UsageError names what is missing or ambiguous, and what exists."""
    documents = [
        d
        for d in _block_documents()
        if d.name and "notify" in (d.block_schema.capabilities if d.block_schema else [])
    ]
    found = []
    for name in names:
        slug, _, bare = name.rpartition("/")
        matches = [
            d
            for d in documents
            if d.name == bare and (not slug or (d.block_type and d.block_type.slug == slug))
        ]
        if len(matches) != 1:
            raise UsageError(_not_one(name, matches, documents))
        found.append(matches[0])
    return found


def _block_documents(page: int = 200) -> list[BlockDocument]:
    """Every block document of the server (the API answers a page at a time)."""
    found: list[BlockDocument] = []
    with get_client(sync_client=True) as client:
        while True:
            batch = client.read_block_documents(
                offset=len(found), limit=page, include_secrets=False
            )
            found += batch
            if len(batch) < page:
                return found


def _not_one(name: str, matches: list[BlockDocument], documents: list[BlockDocument]) -> str:
    def full(d: BlockDocument) -> str:
        return f"{d.block_type.slug if d.block_type else '?'}/{d.name}"

    if matches:
        return (
            f"--notify {name}: several notification blocks have that name"
            f" ({', '.join(full(d) for d in matches)}); name one as block-type/name"
        )
    known = ", ".join(sorted(full(d) for d in documents)) or "none"
    return (
        f"--notify {name}: no notification block of that name on the Prefect server (there:"
        f" {known}). Create one in the UI (Blocks > +) or in Python, e.g."
        " SlackWebhook(url=...).save('team'), then pass --notify slack-webhook/team"
    )


def ensure_alerts(block_names: Sequence[str]) -> list[str]:
    """Create, or update by name, every alert automation so that it sends through the
    blocks named (see `find_notification_blocks`). Returns the automations' names."""
    blocks = find_notification_blocks(block_names)
    if not blocks:
        raise UsageError("--notify: name at least one notification block")
    wanted = alert_automations([block.id for block in blocks])
    upsert_automations(wanted)
    return [automation.name for automation in wanted]


def upsert_automations(wanted: Sequence[AutomationCore]) -> None:
    """Create each automation of `wanted`, or update the one of the same name."""
    with get_client(sync_client=True) as client:
        for automation in wanted:
            existing = client.read_automations_by_name(automation.name)
            if not existing:
                client.create_automation(automation)
                existing = client.read_automations_by_name(automation.name)
            # Two `serve` started at once may both have created it: both keep the same one.
            keep, *extra = sorted(existing, key=lambda a: str(a.id))
            client.update_automation(keep.id, automation)
            for duplicate in extra:
                try:
                    client.delete_automation(duplicate.id)
                except ObjectNotFound:  # the other process removed it first
                    pass
