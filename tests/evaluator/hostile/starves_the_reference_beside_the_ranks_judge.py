"""Attack (all-reduce, the in-rank judge: the GPUs' default, `--cpu-judge ranks` on CPU): starve
the reference's timed blocks from helpers that run while the candidate itself is idle.

Judged in the ranks, both sides' processes were alive for the whole timed phase, and nothing
stood the candidate still while the reference's blocks ran. At import each rank starts 40
spinning processes, each in a session of its own (a scheduler group of its own, against the one
the reference's ranks share); they are stopped (SIGSTOP) when one of the rank's own calls begins
and continued by a watching thread once the rank has been idle 30 ms, so they spin beside the
reference's blocks, not the candidate's. The answers are wrong (its own share, never reduced).

Before the fix (sandbox on, 2026-11-29): the reference's block ran past its deadline, "ranks 0, 1
made no progress for 8 s during timing: deadlock or timeout", reported as our harness_error
(40.7 s; an honest variant, which reduces, read the same). The candidate is now frozen around
each of the reference's blocks (judge/beside.py): its helpers stand still with it, and its
wrong answers are judged (value_mismatch)."""

import os
import signal
import subprocess
import sys
import threading
import time

SPINNERS = 40  # per rank, each in a session of its own
IDLE_S = 0.03  # the rank is between its own blocks after this long without a call

SPIN = ("import os, signal\n"
        f"for _ in range({SPINNERS}):\n"
        "    if os.fork() == 0:\n        os.setsid()\n        while True:\n            pass\n"
        "signal.pause()\n")
_helper = subprocess.Popen([sys.executable, "-S", "-c", SPIN])
_state = {"last": time.monotonic(), "running": True, "pids": []}


def _spinners():
    if len(_state["pids"]) < SPINNERS:
        with open(f"/proc/{_helper.pid}/task/{_helper.pid}/children") as handle:
            _state["pids"] = [int(p) for p in handle.read().split()]
    return _state["pids"]


def _send(sig):
    for pid in _spinners():
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _watch():
    while True:
        time.sleep(0.005)
        if not _state["running"] and time.monotonic() - _state["last"] > IDLE_S:
            _state["running"] = True
            _send(signal.SIGCONT)


threading.Thread(target=_watch, daemon=True).start()


def solution(x, *, group):
    _state["last"] = time.monotonic()
    if _state["running"]:
        _state["running"] = False
        _send(signal.SIGSTOP)
    out = x.clone()  # its own share only: wrong on every call
    _state["last"] = time.monotonic()
    return out
