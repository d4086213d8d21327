"""The round's markdown artifact (tasks.record), as the Prefect API stores it and a markdown
renderer reads it: what a script printed stays inside its code block."""

from __future__ import annotations

import uuid

from markdown_it import MarkdownIt
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

from tasks.keys import artifact_key
from tasks.record import publish_round

HOSTILE = (
    "rows: 3\n```\n# Injected heading\n<img src=x onerror=alert(1)>\n"
    "````\n[click](http://attacker.example)\n``````` and ~~~\n"
)


def test_script_output_and_code_cannot_break_out_of_their_code_blocks():
    run_id = f"fence-{uuid.uuid4().hex[:8]}"
    code = 'print("```")\nprint("# not a heading")\n'
    item = {"number": 0, "plan": ["Print the rows."], "code": code, "output": HOSTILE,
            "verdict": True, "route": None, "input_tokens": 1, "output_tokens": 1,
            "seconds": 0.5}  # fmt: skip
    publish_round(run_id, item, "file:///tmp/run")
    key = artifact_key(f"{run_id}-round-00")
    with get_client(sync_client=True) as client:
        [artifact] = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    tokens = MarkdownIt().parse(artifact.data)
    blocks = [t.content.rstrip("\n") for t in tokens if t.type == "fence"]
    assert blocks == [code.rstrip("\n"), HOSTILE.rstrip("\n")]  # each whole, in its block
    assert [t.markup for t in tokens if t.type == "heading_open"] == ["###"]  # the title only
    assert not [t for t in tokens if t.type == "html_block"]
