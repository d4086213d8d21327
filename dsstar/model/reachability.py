"""Preflight for the model: can litellm route it, does its server answer, does it take the key?

Checked in a few seconds before anything is stored, with one free request per distinct model
and address: the provider's list of models (OpenAI and any OpenAI-compatible server, Anthropic,
Gemini), which answers 401 or 403 to a bad key; for other providers given an `--api-base`, a
plain request that shows the server answers. Providers whose credentials come from a cloud
chain (Bedrock, Vertex AI) are only routed, not probed. A model the server does not know
still fails at the first call, at once (404, never retried).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

import httpx

from dsstar.errors import ConfigError
from dsstar.model.llm import provider_of

__all__ = ["PROBE_TIMEOUT_S", "check_models"]

# The whole check must stay within a few seconds: one connect and one reply at most.
PROBE_TIMEOUT_S = 3.0

log = logging.getLogger(__name__)

# Providers that speak OpenAI's API: their list of models is GET <base>/models.
_OPENAI_LIKE = {
    "openai", "text-completion-openai", "custom_openai", "openai_like", "hosted_vllm",
    "lm_studio", "deepseek", "groq", "together_ai", "mistral", "fireworks_ai", "xai",
    "openrouter", "deepinfra", "perplexity", "litellm_proxy",
}  # fmt: skip
_DEFAULT_BASES = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}
_KEY_VARIABLES = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}


def check_models(models: Iterable[str], api_base: str | None, api_key: str | None) -> None:
    """Each of `models` (those the agents use: `dsstar.inputs.preflight.used_models`) at
    `api_base` (None: the provider's own): routable by litellm, its server reachable and
    `api_key` accepted (None: the provider's own variable). Raises ConfigError with one line
    that names the setting to fix."""
    for model in models:
        _probe(model, api_base, api_key)


def _probe(model: str, api_base: str | None, key: str | None) -> None:
    provider, default_base = provider_of(model, api_base)
    base = (api_base or _DEFAULT_BASES.get(provider) or default_base or "").rstrip("/")
    if not base:
        return  # a cloud chain (Bedrock, Vertex AI) or a provider without a known address
    key = key or _provider_key(provider)
    url, headers, params = _request(provider, base, key, api_base is not None)
    where = f"--api-base {api_base}" if api_base else f"{provider}'s API at {base}"
    try:
        response = httpx.get(url, headers=headers, params=params, timeout=PROBE_TIMEOUT_S)
    except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:
        # Connected: the server is there, only slow (a loaded or waking model server, a busy
        # machine). The run goes on; its first call fails with the server's own error if
        # the key is wrong.
        log.warning(
            "%s took over %g s to answer (%s): the key for the model %s was not checked",
            where, PROBE_TIMEOUT_S, type(exc).__name__, model,
        )  # fmt: skip
        return
    except httpx.HTTPError as exc:
        reason = str(exc).strip() or type(exc).__name__
        raise ConfigError(
            f"cannot reach {where} for the model {model} ({reason}): check the address"
            " (--api-base, DSSTAR_API_BASE) and that the server is running."
        ) from exc
    if response.status_code in (401, 403):
        raise ConfigError(
            f"{where} rejected the key for the model {model} (HTTP {response.status_code}):"
            " set DSSTAR_API_KEY, or the provider's own key such as OPENAI_API_KEY,"
            " GEMINI_API_KEY or ANTHROPIC_API_KEY."
        )


def _provider_key(provider: str) -> str | None:
    names = _KEY_VARIABLES.get(provider, (f"{provider.upper()}_API_KEY",))
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def _request(
    provider: str, base: str, key: str | None, own_server: bool
) -> tuple[str, dict[str, str], dict[str, str]]:
    """The free request that shows whether the server answers and takes the key."""
    if provider == "anthropic" and not own_server:
        headers = {"anthropic-version": "2023-06-01", **({"x-api-key": key} if key else {})}
        return f"{base}/models", headers, {}
    if provider == "gemini" and not own_server:
        return f"{base}/models", {}, ({"key": key} if key else {})
    if provider in _OPENAI_LIKE:
        return f"{base}/models", ({"Authorization": f"Bearer {key}"} if key else {}), {}
    return base, {}, {}  # any answer shows the server is there (Ollama answers "is running")
