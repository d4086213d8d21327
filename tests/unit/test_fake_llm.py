"""Tests for the scripted FakeLLM server, exercised through litellm as production calls it."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no network: use the bundled cost map

from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import litellm  # noqa: E402
import pytest  # noqa: E402
from fake_llm import Error, FakeLLM, text_of  # noqa: E402

litellm.suppress_debug_info = True

HEADERS = {"X-DSStar-Agent": "planner", "X-DSStar-Run": "r1"}
MESSAGES = [
    {"role": "system", "content": "You are a planner."},
    {"role": "user", "content": "Plan the analysis of sales.csv"},
]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """A running FakeLLM, stopped after the test."""
    with FakeLLM() as server:
        yield server


def complete(llm: FakeLLM, agent: str = "planner", **kwargs: Any) -> Any:
    """Call litellm.completion against ``llm`` the way production does."""
    return litellm.completion(
        model="openai/test-model",
        api_base=llm.base_url,
        api_key="sk-test",
        messages=kwargs.pop("messages", MESSAGES),
        extra_headers={**HEADERS, "X-DSStar-Agent": agent},
        max_retries=0,
        **kwargs,
    )


def test_scripted_reply_usage_and_headers(llm: FakeLLM) -> None:
    llm.script("planner", "1. Load sales.csv\n2. Sum revenue")
    resp = complete(llm)
    assert resp.choices[0].message.content == "1. Load sales.csv\n2. Sum revenue"
    assert resp.choices[0].finish_reason == "stop"
    chars = sum(len(m["content"]) for m in MESSAGES)
    assert resp.usage.prompt_tokens == chars // 4
    assert resp.usage.completion_tokens == len("1. Load sales.csv\n2. Sum revenue") // 4
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens

    (req,) = llm.requests
    assert req["agent"] == "planner" and req["run"] == "r1"
    assert req["headers"]["x-dsstar-agent"] == "planner"
    assert req["headers"]["x-dsstar-run"] == "r1"
    assert req["headers"]["authorization"] == "Bearer sk-test"
    assert req["body"]["model"] == "test-model"
    assert req["messages"] == MESSAGES
    assert req["status"] == 200
    assert "sales.csv" in text_of(req) and llm.last_user_text(req) == text_of(req)


@pytest.mark.parametrize(
    ("status", "exc_type"),
    [
        (429, litellm.RateLimitError),
        (503, litellm.ServiceUnavailableError),
        (401, litellm.AuthenticationError),
        (500, litellm.InternalServerError),
    ],
)
def test_scripted_errors_map_to_litellm_exceptions(
    llm: FakeLLM, status: int, exc_type: type[Exception]
) -> None:
    llm.script("planner", Error(status, f"scripted {status}"))
    with pytest.raises(exc_type) as info:
        complete(llm)
    assert getattr(info.value, "status_code", None) == status
    assert f"scripted {status}" in str(info.value)
    assert llm.requests[-1]["status"] == status


def test_fifo_default_fallback_and_unscripted(llm: FakeLLM) -> None:
    llm.script("coder", "```python\nprint(1)\n```", "second")
    llm.default("coder", lambda req: f"default for run {req['run']}")
    assert complete(llm, "coder").choices[0].message.content == "```python\nprint(1)\n```"
    assert complete(llm, "coder").choices[0].message.content == "second"
    assert complete(llm, "coder").choices[0].message.content == "default for run r1"

    with pytest.raises(litellm.InternalServerError, match="no scripted reply for agent 'verifier'"):
        complete(llm, "verifier")
    llm.fallback(lambda req: f"fallback:{req['agent']}")
    assert complete(llm, "verifier").choices[0].message.content == "fallback:verifier"
    assert [r["agent"] for r in llm.calls("coder")] == ["coder"] * 3
    assert len(llm.calls()) == 5


def test_set_handler_replaces_routing(llm: FakeLLM) -> None:
    llm.script("coder", "never used")

    def handler(req: dict[str, Any]) -> str | Error:
        if req["agent"] == "coder" and len(llm.calls("coder")) >= 1:
            return Error(503, "coder down")
        return "ok"

    llm.set_handler(handler)
    assert complete(llm, "coder").choices[0].message.content == "ok"
    with pytest.raises(litellm.ServiceUnavailableError):
        complete(llm, "coder")
    assert complete(llm, "planner").choices[0].message.content == "ok"
    assert [r["status"] for r in llm.calls("coder")] == [200, 503]


def test_streaming(llm: FakeLLM) -> None:
    llm.script("planner", "streamed answer")
    stream = complete(llm, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed answer"
    assert chunks[-1].usage.completion_tokens == len("streamed answer") // 4
    assert llm.requests[0]["body"]["stream"] is True


def test_list_content_models_and_404(llm: FakeLLM) -> None:
    llm.script("analyzer", "described")
    parts = [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]
    messages = [{"role": "user", "content": parts}]
    assert complete(llm, "analyzer", messages=messages).choices[0].message.content == "described"
    assert text_of(llm.requests[0]) == "part one\npart two"

    models = httpx.get(f"{llm.base_url}/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == "test-model"
    missing = httpx.get(f"http://127.0.0.1:{llm.port}/nope")
    assert missing.status_code == 404 and "error" in missing.json()
    direct = httpx.post(f"http://127.0.0.1:{llm.port}/chat/completions", json={"messages": []})
    assert direct.status_code == 500 and "no scripted reply for agent ''" in direct.text


def test_explicit_start_stop() -> None:
    llm = FakeLLM().start()
    try:
        assert llm.base_url == f"http://127.0.0.1:{llm.port}/v1" and llm.port > 0
        llm.script("planner", "hi")
        assert complete(llm).choices[0].message.content == "hi"
    finally:
        llm.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{llm.base_url}/models", timeout=2)
