"""Writing a run (tasks.record): storage writes retry after DSSTAR_STORAGE_RETRY_DELAY; the
round's markdown artifact, as the Prefect API stores it and a markdown renderer reads it:
what a script printed stays inside its code block."""

from __future__ import annotations

import uuid

from markdown_it import MarkdownIt
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

from dsstar.settings import Settings
from flows import _run
from tasks.cache_keys import artifact_key
from tasks.record import publish_round, storage_writer, write_objects

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


def test_a_runs_storage_writes_wait_the_configured_retry_delay(tmp_path, monkeypatch):
    default = Settings(storage=str(tmp_path / "a"), database_url=f"sqlite:///{tmp_path}/l.db")
    assert storage_writer(default.storage_retry_delay).retry_delay_seconds == [1, 4, 10]
    assert write_objects.retry_delay_seconds == [1, 4, 10]
    quick = storage_writer(0.05)
    assert quick.retry_delay_seconds == [0.05, 0.2, 0.5] and quick.retries == 3
    assert quick.retry_condition_fn is write_objects.retry_condition_fn  # storage errors only

    asked = []

    def writer(first_delay: float):
        asked.append(first_delay)
        return storage_writer(first_delay)

    monkeypatch.setattr(_run, "storage_writer", writer)
    monkeypatch.setenv("DSSTAR_STORAGE_RETRY_DELAY", "0.05")
    settings = Settings(storage=str(tmp_path / "b"), database_url=f"sqlite:///{tmp_path}/l.db")
    run = _run.Run.start("retry-delay", settings, {"question": "q", "data": "/d"})
    run.release()
    assert asked == [0.05]  # run.json went through a writer with the configured delay
    assert (tmp_path / "b" / "runs" / "retry-delay" / "run.json").exists()
