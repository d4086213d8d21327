"""The language model: one chat completion through litellm with attribution and accounting
(llm), prompt caching (caching), the preflight that the model answers (reachability), and every
reply kept so that a resumed run asks nothing twice (replies)."""
