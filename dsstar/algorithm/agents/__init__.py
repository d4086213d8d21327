"""One module per agent: `render(...)` builds the chat messages from its Jinja template in
`prompts/`, `parse(text)` turns any reply, however malformed, into a defined result, and
`AGENT` defines the agent (name, templates, parser); the reader describes the charts scripts
save, for the verifier. `ROSTER` lists them all: the names that
`--agent-model` accepts (checked by the preflight) and the run's record of models. The last
three write reports (`dsstar report`): the decomposer breaks an open question into
sub-questions, the writer drafts the report from their answers, the critic reviews it."""

from dsstar.algorithm.agents import (
    analyzer,
    coder,
    critic,
    debugger,
    decomposer,
    finalyzer,
    planner,
    reader,
    router,
    summarizer,
    verifier,
    writer,
)
from dsstar.algorithm.agents._base import PROMPT_OUTPUT_CHARS, Agent, FileInfo, clip, render
from dsstar.algorithm.agents._reading import extract_code, json_value, split_thinking

__all__ = [
    "PROMPT_OUTPUT_CHARS",
    "ROSTER",
    "Agent",
    "FileInfo",
    "analyzer",
    "clip",
    "coder",
    "critic",
    "debugger",
    "decomposer",
    "extract_code",
    "finalyzer",
    "json_value",
    "planner",
    "reader",
    "render",
    "router",
    "split_thinking",
    "summarizer",
    "verifier",
    "writer",
]

# Every agent by name, in the order of Algorithm 1, then the report's (DS-STAR+).
ROSTER: dict[str, Agent] = {
    agent.name: agent
    for agent in (
        analyzer.AGENT,
        planner.AGENT,
        coder.AGENT,
        verifier.AGENT,
        reader.AGENT,
        router.AGENT,
        debugger.AGENT,
        summarizer.AGENT,
        finalyzer.AGENT,
        decomposer.AGENT,
        writer.AGENT,
        critic.AGENT,
    )
}
