"""Bytes-safe text: lone surrogates, invalid UTF-8, NUL and escape sequences, through the model
client, storage, the ledger and the terminal."""

from __future__ import annotations

import io
import json
import socket
import threading
from pathlib import Path

import pytest
from fake_llm import FakeLLM
from rich.console import Console
from test_ledger import database_url, record  # noqa: F401  (a fixture, used by name)

from dsstar.cli import _output
from dsstar.errors import LLMFatalError
from dsstar.events import LLMCall
from dsstar.model.config import LLMConfig
from dsstar.model.llm import complete
from dsstar.records.ledger import Ledger
from dsstar.storage import Store
from dsstar.text import clean, clean_bytes, clean_deep, for_database, for_terminal

MESSAGES = [{"role": "user", "content": "Plan the analysis of orders.csv, please."}]


def ask(base_url: str, messages=MESSAGES):
    return complete(
        LLMConfig(model="openai/gpt-4o-mini", api_base=base_url, timeout=20),
        messages,
        agent="planner",
        run_id="r-text",
        api_key="sk-test-not-secret",
    )


def test_clean_replaces_lone_surrogates_and_joins_pairs() -> None:
    assert clean("plain é ✓") == "plain é ✓"
    assert clean("a\ud800b") == "a\ufffdb"
    assert clean("\udcff\udc80") == "\ufffd\ufffd"  # surrogateescape'd bytes of a file name
    assert clean("\ud83d\ude00") == "😀"  # a pair split into halves is one character again
    assert clean_bytes(b"ok \xff\xfe end") == "ok \ufffd\ufffd end"
    assert clean_deep({"k\ud800": ["v\udfff", ("t", 1)], "n": None}) == {
        "k\ufffd": ["v\ufffd", ["t", 1]],
        "n": None,
    }
    assert for_database({"a": ["x\x00y\ud800"]}) == {"a": ["x\ufffdy\ufffd"]}


@pytest.mark.parametrize(
    "raw",
    [
        "\x1b[31mred\x1b[0m",
        "\x1b]0;pwned title\x07",
        "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",
        "\x9b2J",
        "\x1bP1$r\x1b\\",
        "bell\x07 backspace\x08 cr\r",
        "rtl \u202e override",
        "\x1b",
    ],
)
def test_for_terminal_leaves_no_escape_or_control(raw: str) -> None:
    shown = for_terminal(f"before {raw} after\nnext\tline")
    assert not any(
        (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in shown
    )
    assert shown.startswith("before ") and shown.endswith("after\nnext\tline")


def test_a_lone_surrogate_in_a_reply_arrives_as_valid_text(llm: FakeLLM) -> None:
    llm.script("planner", "Load \ud800 the file \udcff.")
    reply = ask(llm.base_url)
    assert reply.text == "Load \ufffd the file \ufffd."
    reply.text.encode("utf-8")  # encodable, so prompts, storage and the ledger can take it


def test_prompts_with_lone_surrogates_are_sent(llm: FakeLLM) -> None:
    llm.script("planner", "ok")
    assert ask(llm.base_url, [{"role": "user", "content": "file data/\udcffx.csv"}]).text == "ok"
    assert llm.requests[0]["messages"][0]["content"] == "file data/\ufffdx.csv"


class RawServer:
    """An HTTP server whose every reply is the same raw bytes: invalid UTF-8 in a body."""

    def __init__(self, body: bytes) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.body, self.hits = body, 0
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                self.hits += 1
                head = (
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(self.body)}\r\nConnection: close\r\n\r\n"
                )
                conn.sendall(head.encode() + self.body)


def test_an_undecodable_reply_reads_as_empty_and_is_not_retried() -> None:
    body = (
        b'{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":'
        b'[{"index":0,"message":{"role":"assistant","content":"bad \xff\xfe bytes"},'
        b'"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}'
    )
    server = RawServer(body)
    try:
        reply = ask(server.base_url)  # not a transient error (litellm calls it a 500)
    finally:
        server.sock.close()
    assert reply.text == "" and server.hits == 1  # every agent's parse handles an empty reply


def test_an_unencodable_request_is_fatal_not_transient() -> None:
    from dsstar.model.llm import _classify

    try:
        "\ud800".encode("utf-8")
    except UnicodeEncodeError as cause:
        try:
            raise RuntimeError("litellm.APIConnectionError: connection error") from cause
        except RuntimeError as wrapped:
            error = _classify(wrapped, LLMConfig(model="openai/gpt-4o-mini"))
    assert isinstance(error, LLMFatalError) and "could not be encoded" in str(error)


def test_storage_writes_replace_what_cannot_be_encoded(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    store.write_text("runs/r/rounds/00/code.py", "print('\ud800')")
    store.write_json("runs/r/run.json", {"answer": "x\udcff", "plan\ud800": ["\ud83d\ude00"]})
    assert store.read_text("runs/r/rounds/00/code.py") == "print('\ufffd')"
    assert store.read_json("runs/r/run.json") == {"answer": "x\ufffd", "plan\ufffd": ["😀"]}
    (tmp_path / "store/runs/r/bad.txt").write_bytes(b"not \xff utf-8")
    assert store.read_text("runs/r/bad.txt") == "not \ufffd utf-8"


def test_ledger_rows_take_surrogates_and_nul(database_url) -> None:  # noqa: F811
    ledger = Ledger(database_url, "/srv/dsstar")
    ledger.record(
        record("run-1", "North\x00east \ud800", plan=["load \udcff", "sum\x00"]),
        [
            {"round": 0, "step": "load \ud800", "route": None, "verdict": True,
             "execution_ok": True, "input_tokens": 1, "output_tokens": 1, "cost_usd": None,
             "seconds": 0.1},
        ],
        [],
    )  # fmt: skip
    (row,) = ledger.history(ledger_key())
    assert row.answer == "North\ufffdeast \ufffd"
    assert row.plan == ["load \ufffd", "sum\ufffd"]
    assert ledger.rounds("run-1")[0].step == "load \ufffd"


def ledger_key() -> str:
    from test_ledger import QUESTION

    from dsstar.records.ledger import question_key

    return question_key(QUESTION)


RESULT = {
    "run_id": "r1",
    "status": "failed",
    "answer": "North\x1b[2J\x1b]0;owned\x07east \ud800",
    "rounds": 2,
    "plan": ["load [bold]x[/bold] \x1b[31m"],
    "artifacts_uri": "/tmp/[/x]",
    "solution_uri": None,
    "llm_calls": 3,
    "input_tokens": 1,
    "output_tokens": 1,
    "cost_usd": None,
    "flow_run_id": None,
    "reused_solution": False,
    "error": "boom [/red] \x1b[5m",
}


def test_plain_report_shows_no_escape_sequences(monkeypatch) -> None:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(_output, "err", Console(file=err, soft_wrap=True))
    monkeypatch.setattr(
        _output, "console", lambda stderr=False: Console(file=out, markup=False, highlight=False)
    )
    _output.report(RESULT, as_json=False)
    shown = out.getvalue() + err.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown and "\ud800" not in shown
    assert "North" in out.getvalue() and "east" in out.getvalue()
    assert "boom [/red]" in err.getvalue()  # markup in an error is text, not a crash


def test_json_report_stays_valid_json(monkeypatch, capsys) -> None:
    _output.report(RESULT, as_json=True)
    line = capsys.readouterr().out
    line.encode("utf-8")
    data = json.loads(line)
    assert data["answer"] == "North\x1b[2J\x1b]0;owned\x07east \ufffd"  # exact, only encodable


def test_live_progress_line_is_not_markup() -> None:
    progress = _output.LiveProgress(enabled=False)
    progress._on_event(LLMCall("analyzer", "analyzer data/[/x]\x1b[31m.csv"))
    text = progress.__rich__()
    assert "[/x]" in text.plain and "\x1b" not in text.plain
