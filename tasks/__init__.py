"""Thin Prefect tasks around core calls: retries, cache policies, persisted results, run names
and artifacts. What to do lives in the core (`dsstar`); the flows compose these.

    llm        one model request (retried on transient errors, cached per run and request)
    execute    one script in the sandbox (cached per run, label and code)
    analysis   one file's analysis, step 1 (cached by the file's content)
    agents     TaskCalls: the core's `Calls` made of the two tasks above
    record     a run's objects written to storage (retried), and its Prefect artifacts
    slots/     how much runs at once: per-process bounds and a shared server's global limits
    keys       cache keys and artifact keys
"""
