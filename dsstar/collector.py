"""How often the cyclic garbage collector runs in dsstar's own processes: the `dsstar`
command and its temporary Prefect server. A program that imports dsstar keeps its own pace,
and the sandbox's scripts keep Python's.

Starting a run imports some 650,000 objects (Prefect, litellm, the OpenAI client; FastAPI and
SQLAlchemy in a server) that live as long as the process, and makes little cyclic garbage. At
Python's default pace, a young collection every 700 new objects, the collector walked that
growing heap over and over while it loaded: 1.4 s of the 5.5 s of CPU of a `dsstar demo`
against a started server, 8 full collections. A young collection every 50,000 new objects,
with the older generations' ratios unchanged (10, 10), makes that 0.4 s and no full one.
"""

from __future__ import annotations

import gc

__all__ = ["PACE", "set_pace"]

PACE = (50_000, 10, 10)  # gc.set_threshold's arguments


def set_pace() -> None:
    """Collect at dsstar's pace in this process (call it first thing in the process)."""
    gc.set_threshold(*PACE)
