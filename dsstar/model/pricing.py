"""What a model call may cost, before it is sent: litellm's price map applied to counted
tokens. The ceiling of a run (`dsstar.model.ceiling`) checks each call against this bound,
and the request carries the output limit the bound counts (`Estimate.output`), so no reply
can cost more than its bound."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from dsstar.model.llm import Message, count_tokens, model_info

__all__ = ["DEFAULT_OUTPUT_LIMIT", "Estimate", "estimate", "output_limit", "price", "priced"]

# Output tokens assumed for a model whose limit litellm does not know (a local or served
# model): a reply longer than this is rare for our agents, whose scripts fit in far less.
# Near a ceiling a request asks for less than its model's limit, but never for less than
# this (or the model's limit, when smaller): a reply cut shorter would rarely be usable.
DEFAULT_OUTPUT_LIMIT = 8192
# Tokens a chat request adds around each message (role, separators), as OpenAI counts them.
_PER_MESSAGE = 4
# An upper bound of what one image in a request costs in input tokens, whatever its size:
# providers scale an image down before they count it (OpenAI at most about 1,100 tokens,
# Anthropic about 1,600, Gemini 258 to 1,120).
_PER_IMAGE = 2000


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
    the model's price (None when no price is known).

    With `output` set, the request carries that output limit, and near a ceiling it may ask
    for fewer, down to `least` (`within`); without, the bound is fixed."""

    tokens: int
    cost_usd: float | None
    output: int = 0  # the output limit counted in `tokens`, sent with the request
    least: int = 0  # the fewest output tokens the request may be cut to
    output_price: float | None = None  # USD per output token (None: no price known)

    def within(self, tokens_left: float | None, cost_left: float | None) -> Estimate | None:
        """This bound with its output limit lowered to what fits in `tokens_left` and
        `cost_left` (None: no bound); None when even `least` does not fit. A fixed bound
        (no `output`) fits whole or not at all."""
        if not self.output:
            tokens_fit = tokens_left is None or self.tokens <= tokens_left
            cost_fit = cost_left is None or self.cost_usd is None or self.cost_usd <= cost_left
            return self if tokens_fit and cost_fit else None
        fits = self.output
        if tokens_left is not None:
            fits = min(fits, math.floor(tokens_left) - (self.tokens - self.output))
        if cost_left is not None and self.cost_usd is not None and self.output_price:
            input_cost = self.cost_usd - self.output * self.output_price
            fits = min(fits, math.floor((cost_left - input_cost) / self.output_price))
        return self._asking(fits) if fits >= max(self.least, 1) else None

    def at_least(self) -> Estimate:
        """The smallest bound the request may be cut to (itself, for a fixed bound)."""
        return self._asking(self.least) if self.output else self

    def _asking(self, output: int) -> Estimate:
        cut = self.output - output
        cost = None if self.cost_usd is None else self.cost_usd - cut * (self.output_price or 0)
        return replace(self, tokens=self.tokens - cut, cost_usd=cost, output=output)


def estimate(model: str, messages: list[Message]) -> Estimate:
    """The bound of one request to `model`: its input and the model's whole output limit.
    Input is priced in full: whether the provider serves the shared prefix from its cache
    is known only once it has answered, and a ceiling needs the bound, not the likely case."""
    texts, images = _parts(messages)
    input_tokens = count_tokens(model, "\n".join(texts)) + _PER_MESSAGE * len(messages)
    input_tokens += _PER_IMAGE * images
    output = output_limit(model)
    per_output = price(model, 0, 1)
    return Estimate(
        input_tokens + output,
        price(model, input_tokens, output),
        output=output,
        least=min(output, DEFAULT_OUTPUT_LIMIT),
        output_price=per_output,
    )


def _parts(messages: list[Message]) -> tuple[list[str], int]:
    """The texts of `messages` and how many images they carry (a part that is an image is
    counted as one, not as the characters of its data: URL)."""
    texts, images = [], 0
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content:
            if part.get("type") == "image_url":
                images += 1
            else:
                texts.append(str(part.get("text") or ""))
    return texts, images
