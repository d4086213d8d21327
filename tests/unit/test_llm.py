"""dsstar.model.llm against the fake OpenAI-compatible server: replies, accounting, attribution,
error classification, and no hidden retries."""

from __future__ import annotations

import socket
import time

import pytest
from fake_llm import Error, FakeLLM, Reasoned

from dsstar.errors import ConfigError, LLMFatalError, LLMTransientError
from dsstar.inputs.spec import config_for, require_model
from dsstar.model.config import LLMConfig
from dsstar.model.llm import complete
from dsstar.model.pricing import price
from dsstar.settings import Settings

MESSAGES = [{"role": "user", "content": "Plan the analysis of orders.csv, please."}]


def call(llm: FakeLLM, model: str = "openai/gpt-4o-mini", **config: object):
    return complete(
        LLMConfig(model=model, api_base=llm.base_url, **config),
        MESSAGES,
        agent="planner",
        run_id="20260101-000000-abcdef",
        api_key="sk-test-not-secret",
    )


def test_reply_text_tokens_latency_and_cost(llm: FakeLLM) -> None:
    def slow(req: dict) -> str:
        time.sleep(0.2)
        return "Load orders.csv and print its columns."

    llm.default("planner", slow)
    reply = call(llm)
    assert reply.text == "Load orders.csv and print its columns."
    assert reply.model == "openai/gpt-4o-mini"
    assert reply.input_tokens == len(MESSAGES[0]["content"]) // 4
    assert reply.output_tokens == len(reply.text) // 4
    assert 0.2 <= reply.latency_s < 30
    assert reply.cost_usd is not None and 0 < reply.cost_usd < 0.01
    assert reply.to_dict()["text"] == reply.text


def test_reasoning_content_is_stored_apart_from_the_answer(llm: FakeLLM) -> None:
    thought = "The output already has the total, so the plan is sufficient."
    llm.script("planner", Reasoned("Yes", thought))
    reply = call(llm)
    assert reply.text == "Yes"  # what the agent reads
    assert reply.reasoning == thought and reply.to_dict()["reasoning"] == thought


def test_cached_tokens_are_recorded_and_priced(llm: FakeLLM) -> None:
    llm.default("planner", lambda req: "Load fees.json.")
    prefix = "## Data files\n" + "fees.json: card_scheme, account_type, aci, rate\n" * 200
    config = LLMConfig(model="openai/gpt-4o", api_base=llm.base_url)

    def ask(task: str):
        messages = [{"role": "user", "content": f"{prefix}\n## Your task\n{task}"}]
        return complete(config, messages, agent="planner", run_id="r", api_key="sk-x")

    first, second = ask("Plan the first step."), ask("Plan the next step.")
    assert first.cached_tokens == 0 and second.cached_tokens >= 1024
    assert abs(second.input_tokens - first.input_tokens) <= 2
    assert second.cost_usd < first.cost_usd  # cached input is billed at a discount


def test_anthropic_requests_mark_the_shared_prefix_for_caching() -> None:
    from dsstar.model.caching import cache_marked

    messages = [{"role": "user", "content": "files and question\n## Your task\nPlan."}]
    marked = cache_marked(messages, "anthropic/claude-sonnet-4-5")[0]["content"]
    assert marked[0] == {
        "type": "text", "text": "files and question\n## Your task\n",
        "cache_control": {"type": "ephemeral"},
    }  # fmt: skip
    assert marked[1] == {"type": "text", "text": "Plan."}
    assert cache_marked(messages, "openai/gpt-4o") == messages  # cached without marks
    assert (
        cache_marked(messages, "bedrock/anthropic.claude-3-5-sonnet")[0]["content"]
        != (messages[0]["content"])
    )


def test_unknown_model_has_no_cost(llm: FakeLLM) -> None:
    llm.script("planner", "hi")
    reply = call(llm, model="openai/unknown-model-xyz")
    assert reply.text == "hi" and reply.cost_usd is None


def test_attribution_headers_and_options_arrive(llm: FakeLLM) -> None:
    llm.script("planner", "hi", "again")
    call(llm, temperature=0.3)
    (req,) = llm.requests
    assert req["agent"] == "planner" and req["run"] == "20260101-000000-abcdef"
    assert req["headers"]["authorization"] == "Bearer sk-test-not-secret"
    assert req["body"]["model"] == "gpt-4o-mini" and req["body"]["temperature"] == 0.3
    assert req["messages"] == MESSAGES
    call(llm)
    assert "temperature" not in llm.requests[1]["body"]


@pytest.mark.parametrize(
    ("status", "error", "names"),
    [
        (429, LLMTransientError, None),
        (503, LLMTransientError, None),
        (500, LLMTransientError, None),
        (401, LLMFatalError, "DSSTAR_API_KEY"),
        (403, LLMFatalError, "DSSTAR_API_KEY"),
        (404, LLMFatalError, "DSSTAR_MODEL"),
        (400, LLMFatalError, "request refused"),
    ],
)
def test_errors_are_classified_without_retries(
    llm: FakeLLM, status: int, error: type[Exception], names: str | None
) -> None:
    llm.default("planner", lambda req: Error(status, f"scripted {status}"))
    with pytest.raises(error) as info:
        call(llm)
    assert info.value.status_code == status
    assert "gpt-4o-mini" in str(info.value)
    if names:
        assert names in str(info.value)
    assert len(llm.requests) == 1, "litellm or the OpenAI SDK retried behind our back"


def test_unreachable_server_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = LLMConfig(model="openai/gpt-4o-mini", api_base=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(LLMTransientError):
        complete(config, MESSAGES, agent="planner", run_id="r", api_key="sk-test")


def test_require_model_explains_how_to_configure() -> None:
    with pytest.raises(ConfigError) as info:
        require_model(Settings(model=None))
    assert "OPENAI_API_KEY" in str(info.value) and "--api-base" in str(info.value)
    require_model(Settings(model="openai/gpt-4o"))
    require_model(Settings(agent_models={"verifier": "openai/gpt-4o-mini"}))


def test_config_for_uses_per_agent_override() -> None:
    settings = Settings(
        model="openai/gpt-4o",
        agent_models={"verifier": "openai/gpt-4o-mini"},
        api_base="http://127.0.0.1:9/v1",
        temperature=0.1,
        llm_timeout=42,
    )
    assert config_for(settings, "verifier") == LLMConfig(
        model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", temperature=0.1, timeout=42
    )
    assert config_for(settings, "coder").model == "openai/gpt-4o"
    only_verifier = Settings(agent_models={"verifier": "openai/gpt-4o-mini"})
    with pytest.raises(ConfigError, match="coder"):
        config_for(only_verifier, "coder")


def test_agent_models_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSSTAR_AGENT_MODELS", '{"router": "ollama/qwen2.5-coder"}')
    assert config_for(Settings(model="openai/gpt-4o"), "router").model == "ollama/qwen2.5-coder"


def test_a_reply_past_its_output_limit_is_cut_and_counted_as_the_server_bills_it(
    llm: FakeLLM,
) -> None:
    """A server that ignores max_tokens (the scripted one does) writes 200k characters and
    reports 50k completion tokens: the request carried the limit, the text is kept to it,
    and the tokens and cost are the server's, what it bills."""
    long = "Load orders.csv and print its columns. " + "and then some more words " * 8000
    llm.script("planner", long, "Load orders.csv.")
    config = LLMConfig(model="openai/gpt-4o-mini", api_base=llm.base_url)
    reply = complete(config, MESSAGES, agent="planner", run_id="r", api_key="sk-x", max_tokens=500)
    assert llm.requests[0]["body"]["max_tokens"] == 500
    billed = len(long) // 4  # the usage the server reported
    assert billed > 50_000
    assert reply.output_tokens == billed
    assert reply.text.startswith("Load orders.csv and print its columns.")
    assert len(reply.text) <= len(long) * 500 // billed
    assert reply.cost_usd == pytest.approx(price("openai/gpt-4o-mini", reply.input_tokens, billed))
    short = complete(config, MESSAGES, agent="planner", run_id="r", api_key="sk-x", max_tokens=500)
    assert (short.text, short.output_tokens) == ("Load orders.csv.", len("Load orders.csv.") // 4)
