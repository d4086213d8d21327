"""Every reply of the corpus (`reply_corpus.py`) is read as its writer meant it."""

from __future__ import annotations

from collections import Counter

import pytest
from reply_corpus import CORPUS, Case

from dsstar.algorithm.agents import (
    analyzer,
    coder,
    debugger,
    finalyzer,
    planner,
    router,
    summarizer,
    verifier,
)

CODE_PARSERS = {
    "coder": coder.parse,
    "debugger": debugger.parse,
    "finalyzer": finalyzer.parse,
    "analyzer": analyzer.parse,
}


def reading(case: Case) -> object:
    """What dsstar reads in the reply, in the corpus's terms."""
    if case.agent == "verifier":
        return verifier.read(case.reply)
    if case.agent == "router":
        route = router.parse(case.reply, plan_length=3)
        return route.wrong_step if route.clear else "unclear"
    if case.agent == "planner":
        why = planner.unanswerable(case.reply)
        return f"N/A: {why}" if why else planner.parse(case.reply)
    if case.agent == "summarizer":
        return summarizer.parse(case.reply)
    return CODE_PARSERS[case.agent](case.reply)


def test_the_corpus_is_large_and_covers_every_agent() -> None:
    agents = Counter(case.agent for case in CORPUS)
    assert len(CORPUS) >= 150
    assert set(agents) == {*CODE_PARSERS, "verifier", "router", "planner", "summarizer"}
    assert agents["verifier"] >= 40 and agents["router"] >= 30 and agents["planner"] >= 20


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: f"{c.agent}-{c.style}")
def test_reply_is_read_as_meant(case: Case) -> None:
    assert reading(case) == case.expected
