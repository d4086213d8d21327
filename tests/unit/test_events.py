"""Events are typed records, one frozen class per kind in `dsstar.events`; listeners match
them by class and pass over the kinds they do not show; the handler of `dsstar.ask` hears
them one at a time, and its mistakes never stop a run."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import threading
import time
from contextlib import nullcontext

import pytest

from dsstar import events, progress
from dsstar.api import _following
from dsstar.cli._output import LiveProgress
from dsstar.events import (
    AnalysisStarted,
    Analyzed,
    Event,
    LLMCall,
    LLMFailed,
    LLMReplied,
    Retrieved,
    RoundDone,
    Unprofiled,
)


def test_every_kind_is_a_frozen_event_named_in_all():
    kinds = [
        c for _, c in inspect.getmembers(events, inspect.isclass)
        if issubclass(c, Event) and c.__module__ == events.__name__
    ]  # fmt: skip
    assert len(kinds) > 10 and {c.__name__ for c in kinds} <= set(events.__all__)
    for kind in kinds:
        assert dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen, kind


def test_a_reply_record_becomes_its_event():
    record = {"agent": "coder", "label": "coder r00", "run_id": "r", "text": "...",
              "model": "m", "input_tokens": 7, "output_tokens": 3, "cost_usd": None}  # fmt: skip
    event = LLMReplied.from_reply(record)
    assert event == LLMReplied("coder", "coder r00", "m", 7, 3, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.input_tokens = 0  # type: ignore[misc]


def test_the_live_line_passes_over_the_story():
    with LiveProgress(enabled=False) as live:
        progress.emit(Analyzed(files=[]))
        progress.emit(Retrieved(paths=["data/a.csv"], total=1))
        assert live.line().startswith("starting · - ·")
        progress.emit(LLMCall("planner", "planner r00"))
        progress.emit(LLMReplied("planner", "planner r00", "m", 1, 1, None))
        progress.emit(RoundDone(0, False, llm_calls=1, input_tokens=1, output_tokens=1,
                                cost_usd=None))  # fmt: skip
        assert live.line().startswith("round 00 not sufficient · planner r00 ·")


def test_a_call_in_flight_is_named_with_its_time_and_said_again_in_a_log(capsys):
    """A slow model is not a hang: the line names the call in flight longest and for how
    long, and where stderr is a log the line is written again each interval (a setting,
    DSSTAR_PROGRESS_INTERVAL: a minute by default) while nothing else is said."""
    with LiveProgress(enabled=False, interval=0.2) as live:
        progress.emit(AnalysisStarted(total=3))
        progress.emit(LLMCall("analyzer", "analyzer orders.csv"))
        progress.emit(LLMCall("analyzer", "analyzer regions.json"))
        said: list[str] = []
        deadline = time.monotonic() + 60
        while len([line for line in said if "in flight 00:01" in line]) < 2:
            assert time.monotonic() < deadline, said
            time.sleep(0.2)
            said += capsys.readouterr().err.splitlines()
        flying = [line for line in said if "in flight 00:01" in line]
        assert flying[0].startswith(
            "analyzing 3 files · analyzer orders.csv in flight 00:01 (+1 more) · 00:0"
        ), flying
        progress.emit(LLMReplied("analyzer", "analyzer orders.csv", "m", 900, 100, None))
        progress.emit(LLMFailed("analyzer", "analyzer regions.json", "Timeout: 300 s"))
        assert live.line().startswith("analyzing 3 files · analyzer regions.json · ")
        assert "1,000 tokens" in live.line()


def test_files_without_an_offline_profile_are_said_on_a_line_of_their_own(capsys):
    with LiveProgress(enabled=False) as live:  # stderr is no terminal here: lines, as in a log
        progress.emit(AnalysisStarted(total=40, cached=0))
        progress.emit(Unprofiled(reasons={f"data/{n}.bin": "not a table" for n in range(3)}))
        assert live.line().startswith("analyzing 40 files · ")  # the state goes on
    said = capsys.readouterr().err.splitlines()
    assert said[-1] == "3 files have no offline profile: each is analyzed alone"


def test_the_handler_hears_one_event_at_a_time_and_its_errors_stop_nothing(caplog):
    inside, most, heard = [0], [0], []

    def handler(event: Event) -> None:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        threading.Event().wait(0.001)  # long enough for another thread to come in
        heard.append(event)
        inside[0] -= 1
        if isinstance(event, LLMCall) and event.label == "boom":
            raise RuntimeError("a bug in the handler")

    with caplog.at_level(logging.ERROR, logger="dsstar.api"), _following(nullcontext(), handler):
        threads = [
            threading.Thread(target=lambda n=n: progress.emit(LLMCall("coder", f"coder {n}")))
            for n in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        progress.emit(LLMCall("coder", "boom"))  # logged, not raised
        progress.emit(LLMCall("coder", "after"))
    progress.emit(LLMCall("coder", "not heard"))  # the run is over: nobody listens

    assert most[0] == 1 and len(heard) == 10 and heard[-1] == LLMCall("coder", "after")
    assert "on_event failed" in caplog.text and "a bug in the handler" in caplog.text
