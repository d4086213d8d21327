"""A ceiling no run passes, in its parts: prices from litellm's map, the bound of a call
before it is sent, the meter that holds bounds of calls in flight and counts each reply once,
and the preflight that refuses --max-cost for a model without a price."""

from __future__ import annotations

import threading
import time

import pytest

from dsstar.algorithm.agents import ROSTER
from dsstar.errors import ConfigError, OverBudget
from dsstar.inputs.preflight import check_priced
from dsstar.model.ceiling import Ceiling, Meter, spent_line
from dsstar.model.pricing import DEFAULT_OUTPUT_LIMIT, Estimate, estimate, price, priced
from dsstar.settings import Settings

MINI = "openai/gpt-4o-mini"  # $0.15 / $0.60 per million tokens, cached input $0.075
SERVED = "openai/our-served-model"  # an OpenAI-compatible server's model: no price known


def reply(label: str, cost: float, tokens: int = 100) -> dict:
    return {"label": label, "model": MINI, "request": label, "cost_usd": cost,
            "input_tokens": tokens, "output_tokens": 0}  # fmt: skip


def test_prices_come_from_litellms_map_with_cached_input_at_the_cache_price() -> None:
    assert price(MINI, 1_000_000, 0) == pytest.approx(0.15)
    assert price(MINI, 0, 1_000_000) == pytest.approx(0.60)
    assert price(MINI, 1_000_000, 0, cached_tokens=1_000_000) == pytest.approx(0.075)
    assert priced(MINI) and not priced(SERVED)
    assert price(SERVED, 1000, 1000) is None


def test_a_calls_bound_is_its_counted_input_plus_the_models_output_limit() -> None:
    messages = [{"role": "user", "content": "Describe data/orders.csv. " * 200}]
    bound = estimate(MINI, messages)
    input_tokens = bound.tokens - 16_384  # gpt-4o-mini answers with at most 16,384 tokens
    assert 1000 < input_tokens < 1400
    assert bound.cost_usd == pytest.approx(input_tokens * 0.15e-6 + 16_384 * 0.6e-6)
    unknown = estimate(SERVED, messages)
    assert unknown.cost_usd is None and unknown.tokens > DEFAULT_OUTPUT_LIMIT
    assert (bound.output, bound.least) == (16_384, DEFAULT_OUTPUT_LIMIT)
    assert bound.output_price == pytest.approx(0.6e-6)
    assert (unknown.output, unknown.least) == (DEFAULT_OUTPUT_LIMIT, DEFAULT_OUTPUT_LIMIT)


def test_an_image_in_a_request_counts_as_its_bound_not_as_the_characters_of_its_data() -> None:
    from dsstar.algorithm.agents import reader

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 800  # 200 KB: 270,000 base64 characters
    messages = reader.render(name="chart.png", question="Plot it.", data=png, kind="image/png")
    [text_only] = reader.render(name="chart.png", question="Plot it.", data=b"", kind="image/png")
    text_only = [{"role": "user", "content": text_only["content"][:1]}]
    with_image, without = estimate(MINI, messages), estimate(MINI, text_only)
    assert with_image.tokens - without.tokens == 2000  # at most what a provider counts
    assert with_image.cost_usd == pytest.approx(without.cost_usd + 2000 * 0.15e-6)


def test_near_the_ceiling_a_call_asks_for_what_is_left_never_less_than_its_least() -> None:
    """The output limit a call is sent with is the model's, lowered to what the ceiling
    leaves after its input; below `least` the call is refused, naming that least."""
    bound = Estimate(1000 + 16_384, None, output=16_384, least=8192)
    meter, ceiling = Meter(), Ceiling(max_tokens=30_000)
    with meter.hold(ceiling, bound, "analyzer a.csv") as held:
        assert (held.output, held.tokens) == (16_384, 17_384)
        meter.charge(reply("analyzer a.csv", 0.0, tokens=15_000))
    with meter.hold(ceiling, bound, "planner r00") as held:
        assert (held.output, held.tokens) == (14_000, 15_000)  # all that is left
        meter.charge(reply("planner r00", 0.0, tokens=7000))
    with pytest.raises(OverBudget, match="may use up to 9,192 tokens, more than the 8,000 left"):
        with meter.hold(ceiling, bound, "coder r00"):
            pass


def test_under_a_cost_ceiling_the_output_limit_is_what_the_money_left_buys() -> None:
    messages = [{"role": "user", "content": "Plan the first step."}]
    bound = estimate(MINI, messages)
    input_cost = bound.cost_usd - 16_384 * 0.6e-6
    meter, ceiling = Meter(), Ceiling(max_cost=0.009)
    meter.charge(reply("analyzer", 0.003))
    with meter.hold(ceiling, bound, "planner r00") as held:
        assert held.output == int((0.006 - input_cost) / 0.6e-6)  # about 10,000 tokens
        assert held.cost_usd <= 0.006 and held.output < bound.output
    meter.charge(reply("coder", 0.002))
    with pytest.raises(OverBudget, match=r"\(coder r01\) may cost up to \$0\.0049"):
        with meter.hold(ceiling, bound, "coder r01"):  # 8,192 tokens cost more than $0.004
            pass


def test_a_call_that_could_pass_the_ceiling_is_refused_and_the_meter_says_so() -> None:
    meter, ceiling = Meter(), Ceiling(max_cost=0.05)
    with meter.hold(ceiling, Estimate(1000, 0.03), "planner r00"):
        meter.charge(reply("planner r00", 0.004))
    meter.charge(reply("planner r00", 0.004))  # the same call seen again: counted once
    assert meter.cost_usd == pytest.approx(0.004) and not meter.stopped
    with pytest.raises(
        OverBudget, match=r"\(coder r00\) may cost up to \$0\.0470, more than the \$0\.0460 left"
    ):
        with meter.hold(ceiling, Estimate(1000, 0.047), "coder r00"):
            pass
    assert meter.stopped


def test_tokens_bound_models_without_a_price() -> None:
    meter, ceiling = Meter(), Ceiling(max_cost=1.0, max_tokens=5000)
    with meter.hold(ceiling, Estimate(3000, None), "analyzer a.csv"):  # priced by tokens only
        meter.charge(reply("analyzer a.csv", 0.0, tokens=2500))
    with pytest.raises(OverBudget, match="3,000 tokens, more than the 2,500 left"):
        with meter.hold(ceiling, Estimate(3000, None), "analyzer b.csv"):
            pass
    with pytest.raises(OverBudget, match="set --max-tokens"):
        with Meter().hold(Ceiling(max_cost=1.0), Estimate(10, None), "planner"):
            pass


def test_calls_in_flight_hold_their_bounds_together() -> None:
    """Eight concurrent calls, each bound $0.03 but costing $0.01, under a $0.095 ceiling:
    those that fit go at once, the others wait for room; none is refused while what was
    really spent leaves room, and the total never passes the ceiling."""
    meter, ceiling = Meter(), Ceiling(max_cost=0.095)
    in_flight, most, refused = [0], [0], []
    lock, three = threading.Lock(), threading.Event()

    def call(n: int) -> None:
        try:
            with meter.hold(ceiling, Estimate(100, 0.03), f"analyzer {n}"):
                with lock:
                    in_flight[0] += 1
                    most[0] = max(most[0], in_flight[0])
                    if in_flight[0] == 3:
                        three.set()
                # The first calls stay in flight until three are (a fixed sleep let the first
                # finish before the third started on a loaded machine).
                three.wait(timeout=10)
                time.sleep(0.05)
                with lock:
                    in_flight[0] -= 1
                meter.charge(reply(f"analyzer {n}", 0.01))
        except OverBudget:
            refused.append(n)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 3  # 3 x $0.03 fit in $0.095, a fourth does not
    assert len(refused) == 1  # seven cost $0.07; the eighth's bound would pass $0.095
    assert meter.cost_usd == pytest.approx(0.07)


def test_max_cost_alone_refuses_a_model_without_a_price(monkeypatch) -> None:
    for key in [k for k in __import__("os").environ if k.startswith("DSSTAR_")]:
        monkeypatch.delenv(key)
    check_priced(Settings(model=MINI, max_cost=1.0))
    check_priced(Settings(model=SERVED))  # no ceiling, no price needed
    check_priced(Settings(model=SERVED, max_cost=1.0, max_tokens=100_000))
    with pytest.raises(ConfigError, match=r"cannot bound openai/our-served-model.*--max-tokens"):
        check_priced(Settings(model=MINI, agent_models={"coder": SERVED}, max_cost=1.0))
    # A default no agent uses (each has its own) needs no price.
    check_priced(Settings(model=SERVED, agent_models=dict.fromkeys(ROSTER, MINI), max_cost=1.0))


def test_the_stop_line_says_what_was_spent_what_remains_and_how_to_go_on() -> None:
    record = {"run_id": "r1", "cost_usd": 0.0123, "input_tokens": 9000, "output_tokens": 1000}
    line = spent_line(record, Ceiling(max_cost=0.02), "the next call (coder r01) may cost...")
    assert line.startswith("over budget: spent $0.0123 of --max-cost $0.0200 ($0.0077 left)")
    assert line.endswith("dsstar resume r1 --max-cost N") and "\n" not in line
    tokens = spent_line(record, Ceiling(max_tokens=12_000), "why")
    assert "used 10,000 of --max-tokens 12,000 tokens (2,000 left)" in tokens
    assert tokens.endswith("--max-tokens N")


def test_the_meter_keeps_each_reply_it_counted_once_without_its_text() -> None:
    """What a run received, however far it got: a stop during the file analysis counts the
    replies of analyses not yet recorded from here."""
    meter = Meter()
    reply = {"agent": "analyzer", "label": "analyzer a.csv", "model": "m", "request": "h1",
             "text": "a long script...", "input_tokens": 900, "output_tokens": 100,
             "cost_usd": 0.001}  # fmt: skip
    meter.charge(reply)
    meter.charge(dict(reply))  # read back from a cache: the same call
    meter.charge(reply | {"label": "analyzer b.csv"})
    calls = meter.calls()
    assert [c["label"] for c in calls] == ["analyzer a.csv", "analyzer b.csv"]
    assert "text" not in calls[0] and calls[0]["input_tokens"] == 900
    assert meter.tokens == 2000
