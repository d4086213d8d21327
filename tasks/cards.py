"""One card per thing: a keyed Prefect artifact is published once per flow run and updated
in place after that.

Prefect adds a new version of a keyed artifact at each `create`, and the flow run's
Artifacts tab shows every version as a card of its own: a rounds table rewritten after each
round showed one table per round. Worse, a create request whose reply was lost (a stalled
server; Prefect's client sends it again) leaves two copies, and a retried flow run publishes
its rounds once more. `publish` therefore looks for this flow run's artifacts under the key:
none, it creates one; else it updates the oldest in place (the server updates the key's
latest version with it) and deletes any other copy.

The UI renders a card's description, and each text cell of a table, as markdown: both are
taken as plain text and escaped here (`md_text`), so whatever a script, a model or a file
put in them shows as that text. A markdown card's body is the caller's to build from escaped
parts (tasks/record.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from prefect import get_client
from prefect.artifacts import Artifact, MarkdownArtifact, TableArtifact
from prefect.client.schemas.actions import ArtifactCreate, ArtifactUpdate
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)
from prefect.exceptions import ObjectNotFound
from prefect.utilities.context import get_task_and_flow_run_ids

from dsstar.text import clean, clean_deep, md_text

__all__ = ["publish", "publish_markdown", "publish_table", "published"]


def publish_markdown(
    key: str, markdown: str, description: str, flow_run_id: UUID | None = None
) -> None:
    """The markdown card `key` of this flow run (or of `flow_run_id`, from outside it: a
    crashed run's card), created or updated in place. `description` is plain text."""
    card = MarkdownArtifact(key=key, markdown=clean(markdown), description=md_text(description))
    publish(card, flow_run_id)


def publish_table(key: str, table: list[dict[str, Any]], description: str) -> None:
    """The table card `key` of this flow run, created or updated in place. Its cells and
    `description` are plain text: a text cell is escaped (the UI renders it as markdown), a
    column name is not (the UI shows it as it is)."""
    cells = [{k: md_text(v) if isinstance(v, str) else v for k, v in row.items()} for row in table]
    publish(TableArtifact(key=key, table=clean_deep(cells), description=md_text(description)))


def publish(artifact: Artifact, flow_run_id: UUID | None = None) -> None:
    """Create `artifact` (keyed) for this flow run (or `flow_run_id`), or update its card
    under that key."""
    own = get_task_and_flow_run_ids()[1]
    flow_run_id = flow_run_id or own
    artifact.flow_run_id = flow_run_id
    if flow_run_id is None:  # outside any flow run: nothing to find it by
        artifact.create(_sync=True)  # type: ignore[call-arg]  # async_dispatch
        return
    with get_client(sync_client=True) as client:
        cards = _cards(client, artifact.key, flow_run_id)
        if not cards:
            _create(client, artifact, inside=own is not None and own == flow_run_id)
            cards = _cards(client, artifact.key, flow_run_id)  # a lost reply: two were made
        else:
            data = artifact.format(_sync=True)  # type: ignore[call-arg]  # async_dispatch
            update = ArtifactUpdate(data=data, description=artifact.description)
            client.update_artifact(cards[0].id, update)
        for copy in cards[1:]:
            try:
                client.delete_artifact(copy.id)
            except ObjectNotFound:  # a retried delete: gone already
                pass


def _create(client: Any, artifact: Artifact, inside: bool) -> None:
    """Create `artifact`: from inside a run as Prefect does (with its task run), from outside
    (another flow run's card) through the client, where Prefect deprecates `create`."""
    if inside:
        artifact.create(_sync=True)  # type: ignore[call-arg]  # async_dispatch
        return
    data = artifact.format(_sync=True)  # type: ignore[call-arg]  # async_dispatch
    fields = {"type": artifact.type, "key": artifact.key, "description": artifact.description}
    client.create_artifact(ArtifactCreate(**fields, flow_run_id=artifact.flow_run_id, data=data))


def published(key: str, flow_run_id: UUID, since: datetime | None = None) -> bool:
    """Whether the flow run has a card under `key` (written or updated `since`, if given)."""
    with get_client(sync_client=True) as client:
        cards = _cards(client, key, flow_run_id)
    return any(since is None or (c.updated or c.created) >= since for c in cards)


def _cards(client: Any, key: str | None, flow_run_id: Any) -> list[Any]:
    """This flow run's artifacts under `key`, oldest first."""
    found = client.read_artifacts(
        artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[key]),
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
        )
    )
    return sorted(found, key=lambda a: (a.created, str(a.id)))
