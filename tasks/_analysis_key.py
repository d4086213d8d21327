"""The key of a file's analysis in the catalog and in Prefect's cache. Apart from
`analysis.py` so that a command answering from the catalog imports no Prefect."""

from __future__ import annotations

from typing import Any

from dsstar import agents

from ._common import digest

__all__ = ["analyzer_request", "config_key"]


def analyzer_request(file: dict[str, Any]) -> list[dict[str, str]]:
    """The analyzer's messages for `file` (a DataFile as a dict)."""
    return agents.analyzer.render(path=f"data/{file['path']}", format=file["format"])


def config_key(file: dict[str, Any], spec: dict[str, Any]) -> str:
    """What, besides the file's content, makes its analysis: path, prompt, models and limits,
    but not the run: every run over an unchanged file reuses the first description. Only
    what changes a reply counts (model, temperature): a moved gateway or a longer timeout
    does not make a description stale."""
    models = {
        name: (spec["llm"][name]["model"], spec["llm"][name].get("temperature"))
        for name in ("analyzer", "debugger", "summarizer")
    }
    return digest(file["path"], analyzer_request(file), models, spec["limits"])
