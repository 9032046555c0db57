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
from collections import deque
from typing import Iterable


# A share of one core the side must use, over windows of at least WINDOW_S, to count as working.
# Low on purpose: a compiler on a host with other jobs gets a small share, a sleeping rank none.
BUSY_SHARE = 0.05
WINDOW_S = 1.0
# How often the launcher samples while it may need an answer, and the shortest window it answers on.
NOTE_EVERY_S = 0.25
MIN_WINDOW_S = 0.2
_TICK = os.sysconf("SC_CLK_TCK")


def _times(pid: int) -> tuple[int, int, int, int] | None:
    """utime, stime, cutime, cstime of a process, in clock ticks (fields 14-17 of proc(5))."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        utime, stime, cutime, cstime = (int(field) for field in fields[11:15])
    except (OSError, IndexError, ValueError):
        return None
    return utime, stime, cutime, cstime


def cpu_seconds(pids: Iterable[int]) -> dict[int, float]:
    """Each process's CPU seconds: its own threads' and those of the children it has reaped.

    The reaped children's part matters: a compiler (cc1plus, a grandchild of the rank) that exits
    takes its own time with it, and reappears only in its parent's ``cutime`` once reaped.
    """
    seconds: dict[int, float] = {}
    for pid in pids:
        if (times := _times(pid)) is not None:
            seconds[pid] = sum(times) / _TICK
    return seconds


def side_cpu_seconds(pids: Iterable[int], reaper: int | None = None) -> float:
    """All the processor time of a side's processes and of the children they reaped, and of
    ``reaper`` (the side's init) only what its reaped children used: its own is the judge's work.
    While the side stands stopped, this does not grow, unless the side escaped the freeze (a
    process killed by a timer it armed still runs its exit, red-team attack dies_while_frozen)."""
    total = sum(cpu_seconds(pids).values())
    if reaper is not None and (times := _times(reaper)) is not None:
        total += (times[2] + times[3]) / _TICK
    return total


def thread_run_ns(pids: Iterable[int]) -> dict[tuple[int, int], int]:
    """Nanoseconds each thread of these processes has run on a processor (the first field of
    /proc/PID/task/TID/schedstat): exact where /proc's processor times count 10 ms ticks. A
    stopped thread adds nothing; one continued by a SIGCONT it had a timer send (a SIGCONT
    continues a process when sent, not when delivered) adds what it ran, however little (red
    team, wakes_itself_while_frozen)."""
    run: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            # Each thread's own state, not the process's: /proc/PID/stat describes the process by
            # its main thread, which says Z once it has ended alone while other threads go on (red
            # team, hides_behind_an_exited_main_thread: a helper whose main thread had exited ran
            # beside the reference unread). A thread that has exited is passed over: its time is
            # final, and a reaper may take it any time.
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                    if handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                        continue
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as handle:
                    run[(pid, int(tid))] = int(handle.read().split()[0])
            except (OSError, IndexError, ValueError):
                continue
    return run


def ran_since(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> int:
    """Nanoseconds threads ran between two readings; a thread new since the first, all it ran."""
    return sum(max(0, ns - before.get(key, 0)) for key, ns in after.items())


def ended_since(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> int:
    """Threads of the first reading gone from the second. A stopped thread ends only if something
    kills it, and its exit then runs beside the other side; a process whose parent ignores
    SIGCHLD is reaped at once, its time credited to no one (red team, dies_while_frozen)."""
    return sum(1 for key in before if key not in after)


class BusyWatch:
    """Samples a side's CPU time while the judge may need to know whether it works; ``busy()``
    says whether the side used its share of a core over the last window before now.

    The window must end now. A first-call trial may run past its step limit only while the side
    works, and an answer read from an older window let a rank that had fallen asleep run on: CI
    (2026-11-28) saw a rank asleep for 3.5 s pass a 2 s step limit, because the first reading
    spanned the side's whole start and a later one reused it. So the launcher notes samples while
    such a trial runs (``due``, ``note``), and ``busy()`` compares a fresh sample with the latest one at
    least WINDOW_S old.

    A window's work is the sum of each process's increase, never a difference of totals: when a
    process exits, its time leaves the total, and a side whose compiler had just finished read as
    idle (a negative window) in the instant before the rank reported the build's failure; the
    launcher then called a failed build a deadlock (CI, 2026-11-27). A reaped child's time may
    count twice (in its own samples, then in its parent's ``cutime``): that errs toward working,
    which buys a side at most the build limit.
    """

    def __init__(self) -> None:
        self.samples: deque[tuple[float, dict[int, float]]] = deque()

    def due(self) -> bool:
        """Whether the last sample is NOTE_EVERY_S old: asked before the side's processes are
        listed, which is a walk of /proc, on a launcher's poll every few milliseconds."""
        return not self.samples or time.monotonic() - self.samples[-1][0] >= NOTE_EVERY_S

    def note(self, pids: list[int]) -> None:
        """Take a sample of these processes' CPU time now."""
        now = time.monotonic()
        self.samples.append((now, cpu_seconds(pids)))
        # Keep the latest sample at least a window old (the next baseline) and all after it.
        while len(self.samples) > 2 and self.samples[1][0] <= now - WINDOW_S:
            self.samples.popleft()

    def busy(self, pids: list[int]) -> bool:
        """Whether the side used BUSY_SHARE of a core between the latest sample at least WINDOW_S
        old (the oldest, if none is that old) and now. With no earlier sample, it did not: the
        judge has seen nothing it could call work."""
        earlier = list(self.samples)
        self.note(pids)
        now, sample = self.samples[-1]
        old = [entry for entry in earlier if entry[0] <= now - WINDOW_S]
        base = old[-1] if old else (earlier[0] if earlier else None)
        if base is None or now - base[0] < MIN_WINDOW_S:
            return False
        since, seen = base
        work = sum(max(0.0, seconds - seen.get(pid, 0.0)) for pid, seconds in sample.items())
        return work >= BUSY_SHARE * (now - since)
