"""Attack (all-reduce): both sides start at once, and only the start-up runs them side by side.
At import the candidate starts many spinning processes, each in a session of its own (a scheduler
group of its own where the kernel groups by session), and holds its own rank back until just
before its start-up allowance ends. The reference, starting beside them, gets almost no
processor, and its own start-up allowance, counted from its launch, ran out while the candidate
still stood unfrozen, and so did its sandbox's set-up time (90 s): before the fix, either was
reported as our `harness_error`, and this candidate, whose answers are wrong (it never
communicates), ended without a verdict against it."""

import os
import subprocess
import sys
import time

HOLD_S = 20.0  # after its launch, when the rank lets its start-up end (the default limits allow 840 s)
SPINNERS = 60


def _age_s() -> float:
    with open("/proc/self/stat") as handle:
        started = int(handle.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as handle:
        return float(handle.read().split()[0]) - started


# One small interpreter forks the spinners (forks of the rank would each count its whole memory).
SPIN = ("import os, sys, time\nuntil = time.monotonic() + float(sys.argv[1])\n"
        f"for _ in range({SPINNERS}):\n"
        "    if os.fork() == 0:\n        os.setsid()\n"
        "        while time.monotonic() < until:\n            pass\n        os._exit(0)\n")
_left = HOLD_S - _age_s()
subprocess.Popen([sys.executable, "-S", "-c", SPIN, str(_left)])
time.sleep(max(0.0, _left))


def solution(x, *, group):
    return x.clone()  # its own share only: wrong on every call
