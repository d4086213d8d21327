"""The language model: which model each agent uses (config), one chat completion through
litellm with attribution and accounting (llm), prompt caching (caching), the preflight that the
model answers (reachability), and every reply kept so that a resumed run asks nothing twice
(replies)."""

# The public names of this package are its modules, imported where they are used (several
# pull in heavy libraries that most commands never need).
__all__ = [
    "caching",
    "config",
    "llm",
    "reachability",
    "replies",
]
