"""Prompt caching and what a reply says beyond its text.

Every solution agent's prompt opens with the same data files and question (`prompts/_context.j2`)
and only then says what the agent is to do: one stable prefix per run, which OpenAI and Gemini
serve from their prompt caches by themselves (prefixes of 1,024+ tokens) and Anthropic does
when the request marks it (`cache_control`). Cached tokens come back in the usage and are
priced at a discount by litellm's cost.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PREFIX_END", "cache_marked", "cached_tokens", "reasoning_of"]

Message = dict[str, str]

# Every solution agent's prompt opens with the same files and question, up to this heading
# (prompts/_context.j2): the prefix a provider's prompt cache can serve to all of them.
PREFIX_END = "\n## Your task\n"
# Providers that cache only what the request marks (OpenAI and Gemini cache prefixes of 1,024+
# tokens by themselves).
_MARKED_CACHE = ("anthropic",)


def cache_marked(messages: list[Message], model: str) -> list[Any]:
    """`messages` with the shared prefix marked for caching (`cache_control`) where the
    provider needs it: Anthropic, and Claude on Bedrock or Vertex AI. Unchanged elsewhere."""
    provider = model.split("/", 1)[0] if "/" in model else ""
    claude_elsewhere = provider in ("bedrock", "vertex_ai") and "claude" in model
    if not (provider in _MARKED_CACHE or claude_elsewhere or model.startswith("claude")):
        return messages
    marked: list[Any] = []
    for message in messages:
        content = message.get("content")
        if not marked and isinstance(content, str) and PREFIX_END in content:
            cut = content.index(PREFIX_END) + len(PREFIX_END)
            blocks = [
                {"type": "text", "text": content[:cut], "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": content[cut:]},
            ]
            message = {**message, "content": blocks}
        marked.append(message)
    return marked


def reasoning_of(message: Any) -> str:
    """The model's thinking, as litellm hands it over: `reasoning_content` (DeepSeek, Gemini,
    OpenAI o-series through some gateways) or Anthropic's `thinking_blocks`."""
    said = getattr(message, "reasoning_content", None)
    if isinstance(said, str) and said:
        return said
    blocks = getattr(message, "thinking_blocks", None) or []
    texts = [b.get("thinking", "") if isinstance(b, dict) else "" for b in blocks]
    return "\n\n".join(t for t in texts if t)


def cached_tokens(usage: Any) -> int:
    """Input tokens read from the provider's prompt cache (OpenAI and Gemini report them in
    `prompt_tokens_details`, Anthropic as `cache_read_input_tokens`)."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if not cached:
        cached = getattr(usage, "cache_read_input_tokens", None)
    try:
        return int(cached or 0)
    except (TypeError, ValueError):
        return 0
