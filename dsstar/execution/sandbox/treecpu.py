"""The CPU time of a script's whole process tree, from the watchdog's samples of /proc.

RLIMIT_CPU bounds each process alone: four workers under a 3 s cap could use 12 s together.
The watchdog (supervise.py) samples every process of the script's uid; `TreeCpu` sums their
CPU time with that of the processes already gone:

- a live process counts its own time (utime + stime, all its threads) and that of the
  children it has waited for (cutime + cstime);
- a process gone since the last sample counts at its last sample, unless its parent is alive
  and its children's time grew by as much since: the parent waited for it, and counts it.
  Orphans are reaped by the sandbox's supervisor, which is not the script's, so they count
  at their last sample.

What a process used after its last sample is lost only when no process of the script waited
for it (an orphan, a child of a parent that ignores SIGCHLD): at most one sample's worth
(0.1 s or more) for each, and RLIMIT_CPU still bounds every process alone.
"""

from __future__ import annotations

import os

__all__ = ["Sample", "TreeCpu", "read_stat"]

# {(pid, start time): (parent pid, own CPU ticks, ticks of the children it waited for)}
Sample = dict[tuple[int, int], tuple[int, int, int]]
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def read_stat(stat: bytes, pid: int, sample: Sample) -> int:
    """Put one process's line of /proc/<pid>/stat into `sample`; its number of threads."""
    fields = stat.rsplit(b")", 1)[1].split()  # the name before it may hold anything
    own = int(fields[11]) + int(fields[12])  # utime, stime
    reaped = int(fields[13]) + int(fields[14])  # cutime, cstime
    sample[(pid, int(fields[19]))] = (int(fields[1]), own, reaped)
    return int(fields[17])


class TreeCpu:
    """The CPU seconds a tree has used, over its samples."""

    def __init__(self) -> None:
        self.last: Sample = {}
        self.gone = 0  # ticks of processes gone that no live process counts

    def seconds(self, now: Sample) -> float:
        """The tree's CPU seconds so far, given its sample `now`."""
        alive = {key[0]: key for key in now}
        grown = {key: now[key][2] - self.last.get(key, (0, 0, 0))[2] for key in now}
        for key, (ppid, own, reaped) in self.last.items():
            if key in now:
                continue
            parent = alive.get(ppid)
            if parent is not None and grown[parent] >= own + reaped:
                grown[parent] -= own + reaped  # waited for: in the parent's children's time
            else:
                self.gone += own + reaped
        self.last = now
        return (self.gone + sum(own + reaped for _, own, reaped in now.values())) / _TICKS_PER_S
