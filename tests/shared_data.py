"""Where the shared benchmark data lies: KramaBench's public slice is not in the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _kramabench() -> Path:
    """DSSTAR_KRAMABENCH, else shared/bench/kramabench beside the checkout or above it, else the
    machine's shared folder (/work/shared), which a clone made elsewhere (mktemp) still sees."""
    if os.environ.get("DSSTAR_KRAMABENCH"):
        return Path(os.environ["DSSTAR_KRAMABENCH"])
    here = Path(__file__).resolve()
    for parent in [*here.parents[1:], Path("/work")]:
        if (parent / "shared" / "bench" / "kramabench").is_dir():
            return parent / "shared" / "bench" / "kramabench"
    return here.parents[2] / "shared" / "bench" / "kramabench"


KRAMABENCH = _kramabench()


def _dabstep() -> Path:
    """shared/bench/dabstep beside the checkout or above it, else the machine's shared folder."""
    here = Path(__file__).resolve()
    for parent in [*here.parents[1:], Path("/work")]:
        if (parent / "shared" / "bench" / "dabstep").is_dir():
            return parent / "shared" / "bench" / "dabstep"
    return here.parents[2] / "shared" / "bench" / "dabstep"


# DABStep's real context files (all but payments.csv) and its task files.
DABSTEP = _dabstep()

# The two tests over the whole legal domain need the data itself; the recall tests fail
# instead of skipping, so that a missing slice never passes for a met recall target.
needs_kramabench = pytest.mark.skipif(
    not KRAMABENCH.exists(), reason="KramaBench's legal domain is not on this machine"
)


def _dacode() -> Path:
    """shared/bench/dacode beside the checkout or above it, else the machine's shared folder."""
    here = Path(__file__).resolve()
    for parent in [*here.parents[1:], Path("/work")]:
        if (parent / "shared" / "bench" / "dacode").is_dir():
            return parent / "shared" / "bench" / "dacode"
    return here.parents[2] / "shared" / "bench" / "dacode"


# DA-Code's slice: 14 tasks, their source folders and gold files.
DACODE = _dacode()

needs_dacode = pytest.mark.skipif(
    not DACODE.exists(), reason="DA-Code's slice is not on this machine"
)
