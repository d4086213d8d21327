"""How an agent's model is reached, and what to say when none is configured (which model
each agent uses is chosen from the settings in `dsstar.inputs.spec`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NO_MODEL_HELP", "LLMConfig"]

NO_MODEL_HELP = """No model is configured. dsstar needs an LLM; set one of:
  * a cloud model:  export OPENAI_API_KEY=...  and  --model openai/gpt-4o
                    (or GEMINI_API_KEY with gemini/gemini-2.5-pro, ANTHROPIC_API_KEY with
                    anthropic/claude-sonnet-4-5, ...)
  * a local server: --model ollama/qwen2.5-coder --api-base http://localhost:11434
                    or any OpenAI-compatible server (vLLM, LM Studio, a gateway):
                    --model openai/<served-model> --api-base http://host:8000/v1
The same settings can come from DSSTAR_MODEL, DSSTAR_API_BASE and DSSTAR_API_KEY."""


@dataclass(frozen=True)
class LLMConfig:
    """How to reach one agent's model. JSON-safe and free of secrets (keys come from the env)."""

    model: str
    api_base: str | None = None
    temperature: float | None = None
    timeout: float = 300.0
