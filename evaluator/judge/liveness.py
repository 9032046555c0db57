"""Whether a side is working, as the judge sees it: CPU time its processes used, read from /proc.

A rank that says it is building could be lying (the status channel is in its process), and a hung
rank can send messages forever. What it cannot fake without doing work is using a processor: a
compiler does, a rank asleep in a call or spinning on a peer's flag forever is held to the build
limit either way. So a trial may run past its step limit only while the side keeps a share of a
core busy, and only for the build limit in all.
"""

from __future__ import annotations

import os
import time
from typing import Iterable


# A share of one core the side must use, over windows of at least WINDOW_S, to count as working.
# Low on purpose: a compiler on a host with other jobs gets a small share, a sleeping rank none.
BUSY_SHARE = 0.05
WINDOW_S = 1.0
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime of every thread
        except (OSError, IndexError, ValueError):
            continue
    return total / _TICK


class BusyWatch:
    """Samples a side's CPU time at most once a window; ``busy()`` says whether the last full
    window was working."""

    def __init__(self) -> None:
        self.sampled_at = time.monotonic()
        self.cpu = 0.0
        self.working = False

    def busy(self, pids: list[int]) -> bool:
        now = time.monotonic()
        if now - self.sampled_at >= WINDOW_S:
            cpu = cpu_seconds(pids)
            self.working = cpu - self.cpu >= BUSY_SHARE * (now - self.sampled_at)
            self.sampled_at, self.cpu = now, cpu
        return self.working
