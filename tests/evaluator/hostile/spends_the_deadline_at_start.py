"""Attack (all-reduce): spend the evaluation's time before the reference runs, so that the
deadline passes while the reference is timed. The candidate holds its start-up (allowed 840 s)
until HOLD_S after its launch, just short of its share of a deadline of 40 s, then answers fast
and wrong (it never communicates). Whichever side the judge was running when the time ran out
was blamed for it: the deadline fell in the reference's start-up or its timed blocks (the
candidate's blocks are short), and before the fix the evaluation ended as our `harness_error`,
with no verdict against the wrong answers."""

import os
import time

HOLD_S = 32.0


def _age_s() -> float:
    with open("/proc/self/stat") as handle:
        started = int(handle.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as handle:
        return float(handle.read().split()[0]) - started


time.sleep(max(0.0, HOLD_S - _age_s()))


def solution(x, *, group):
    return x.clone()  # its own share only: wrong on every call
