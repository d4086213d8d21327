"""The LLM call as a Prefect task: retried on transient errors, cached per run and request."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from prefect import task
from prefect.context import TaskRunContext

from dsstar.model.ceiling import Ceiling, meter
from dsstar.model.config import LLMConfig
from dsstar.model.llm import Message, complete, prompt_hash
from dsstar.model.pricing import estimate
from dsstar.model.replies import Replies
from dsstar.settings import api_key_here, default
from dsstar.storage import Store
from tasks._common import is_transient
from tasks.cache_keys import digest, key_part
from tasks.slots import pace, slot

__all__ = ["ask"]


def _cache_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    # Run, round/label, agent, model and the exact request: a resumed run finds every answer
    # it already paid for, while a new round (which may legitimately ask the same thing
    # again, hoping for a different sample) does not.
    # Only what changes the answer counts: the API base or timeout may move between attempts
    # (a gateway moved) without making finished replies stale.
    config = params["config"]
    return "llm-{}-{}-{}-{}".format(
        key_part(params["run_id"]),
        key_part(params["label"]),
        digest(config["model"], config.get("temperature")),
        prompt_hash(params["messages"]),
    )


@task(
    name="llm",
    task_run_name="{label}",
    cache_key_fn=_cache_key,
    persist_result=True,
    result_serializer="json",
    retry_condition_fn=is_transient,
    retry_jitter_factor=0.2,
)
def ask(
    label: str,
    agent: str,
    messages: list[Message],
    config: dict[str, Any],
    run_id: str,
    storage: str | None = None,
    concurrency: int = 1,
    rpm: int | None = None,
    slot_wait: float = default("slot_wait"),
    ceiling: Ceiling | None = None,
) -> dict[str, Any]:
    """Send `messages` to `agent`'s model; returns the reply with tokens, cost and latency.
    At most `concurrency` requests are in flight at once and `rpm` start per minute.
    With `storage`, the reply is kept in the run's store as it arrives, and a request the
    run already had answered (before a crash) is answered from there. With a `ceiling`
    (the run spec's), a request that could pass it is not sent (OverBudget), and one that
    is sent carries an output limit that keeps it within the ceiling."""
    replies = Replies(Store(storage), run_id) if storage else None
    key = replies.key(label, config, messages) if replies else ""
    kept = replies.replay(key) if replies else None
    spent = meter(run_id)
    if kept is not None:  # paid for before: counted, never checked again
        spent.charge(kept)
        return kept
    limit = ceiling or Ceiling()
    bound = estimate(config["model"], messages) if limit else None
    api_key = api_key_here()  # read here, never passed as a (recorded) task parameter
    with slot("llm", concurrency, run_id, slot_wait):
        pace(rpm)
        with spent.hold(limit, bound, label) if bound else nullcontext() as held:
            reply = complete(
                LLMConfig(**config),
                messages,
                agent=agent,
                run_id=run_id,
                label=label,
                api_key=api_key,
                # The output limit the check reserved; without a ceiling, the provider's own.
                max_tokens=held.output if held else None,
            )
            record = {"agent": agent, "label": label, "run_id": run_id,
                      "request": prompt_hash(messages), **reply.to_dict()}  # fmt: skip
            spent.charge(record)
    if replies:
        replies.keep(key, record)
    return record
