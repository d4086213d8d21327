"""Every model reply of a run, kept the moment it arrives, under runs/<run_id>/replies/.

A run can die between a reply's arrival and the point where the orchestrator has recorded
the call as finished (a SIGKILL, a crash of the task's process, a server gone). The reply
was paid for, so it is written to the run's store before anything uses it, and a resumed run
(same run id, same request) reads it back instead of asking again.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dsstar import keys
from dsstar.errors import StorageError
from dsstar.model.llm import Message, prompt_hash
from dsstar.storage import Store

__all__ = ["Replies"]


class Replies:
    """The kept replies of one run."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id

    def key(self, label: str, config: dict[str, Any], messages: list[Message]) -> str:
        """The object of one request: its label (round and agent), model, temperature and
        exact prompt (what changes the answer, as in the task's cache key)."""
        model = {"model": config["model"], "temperature": config.get("temperature")}
        return keys.reply(self.run_id, label, prompt_hash([model, *messages]))

    def replay(self, key: str) -> dict[str, Any] | None:
        """The reply kept under `key`, if the run received it before."""
        try:
            kept = self.store.read_json(key)
        except (FileNotFoundError, StorageError, json.JSONDecodeError):
            return None
        return kept if isinstance(kept, dict) and "text" in kept else None

    def keep(self, key: str, reply: dict[str, Any]) -> None:
        """Write `reply` (the whole record: text, tokens, cost) before it is used."""
        self.store.write_json(key, reply)

    def received(self) -> list[dict[str, Any]]:
        """Every reply the run has kept (its records: label, model, tokens, cost), whatever
        process received it: what a run whose process died spent, the analysis included."""
        folder = keys.replies_folder(self.run_id)
        try:
            names = [name for name in self.store.listdir(folder) if name.endswith(".json")]
        except StorageError:
            return []
        with ThreadPoolExecutor(max_workers=8) as pool:  # one read each: overlap them on S3
            kept = pool.map(lambda name: self.replay(f"{folder}/{name}"), names)
            return [reply for reply in kept if reply is not None]
