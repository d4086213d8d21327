"""What a model call may cost, before it is sent: litellm's price map applied to counted
tokens. The ceiling of a run (`dsstar.model.ceiling`) checks each call against this bound."""

from __future__ import annotations

from dataclasses import dataclass

from dsstar.model.llm import Message, count_tokens, model_info

__all__ = ["DEFAULT_OUTPUT_LIMIT", "Estimate", "estimate", "output_limit", "price", "priced"]

# Output tokens assumed for a model whose limit litellm does not know (a local or served
# model): a reply longer than this is rare for our agents, whose scripts fit in far less.
DEFAULT_OUTPUT_LIMIT = 8192
# Tokens a chat request adds around each message (role, separators), as OpenAI counts them.
_PER_MESSAGE = 4


def priced(model: str) -> bool:
    """Whether litellm knows `model`'s price per input and output token."""
    return price(model, 1, 1) is not None


def price(
    model: str, input_tokens: int, output_tokens: int, cached_tokens: int = 0
) -> float | None:
    """USD for a call of `model` with these tokens, `cached_tokens` of the input read from
    the provider's prompt cache at its cache price; None when no price is known."""
    info = model_info(model)
    per_input, per_output = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if per_input is None or per_output is None:
        return None
    per_cached = info.get("cache_read_input_token_cost")
    per_cached = per_input if per_cached is None else per_cached
    cached = min(cached_tokens, input_tokens)
    return (input_tokens - cached) * per_input + cached * per_cached + output_tokens * per_output


def output_limit(model: str) -> int:
    """The most tokens `model` may answer with (litellm's map), or `DEFAULT_OUTPUT_LIMIT`."""
    info = model_info(model)
    return int(info.get("max_output_tokens") or info.get("max_tokens") or DEFAULT_OUTPUT_LIMIT)


@dataclass(frozen=True)
class Estimate:
    """The most a call may use: its counted input tokens plus its output limit, and that at
    the model's price (None when no price is known)."""

    tokens: int
    cost_usd: float | None


def estimate(model: str, messages: list[Message]) -> Estimate:
    """The bound of one request to `model`. Input is priced in full: whether the provider
    serves the shared prefix from its cache is known only once it has answered, and a
    ceiling needs the bound, not the likely case."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    input_tokens = count_tokens(model, text) + _PER_MESSAGE * len(messages)
    output = output_limit(model)
    return Estimate(input_tokens + output, price(model, input_tokens, output))
