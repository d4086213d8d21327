"""The language model: which model each agent uses (config), one chat completion through
litellm with attribution and accounting (llm), prompt caching (caching), the preflight that the
model answers (reachability), every reply kept so that a resumed run asks nothing twice
(replies), a model that answers with replies recorded earlier (recorded), what a call may
cost before it is sent (pricing), and the ceiling a run's calls never pass (ceiling)."""

# The public names of this package are its modules, imported where they are used (several
# pull in heavy libraries that most commands never need).
__all__ = [
    "caching",
    "ceiling",
    "config",
    "llm",
    "pricing",
    "reachability",
    "recorded",
    "replies",
]
