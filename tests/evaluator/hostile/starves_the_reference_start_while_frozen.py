"""Attack (all-reduce): starve the reference's start-up from inside the freeze, then leave.

Since the fourth pass the reference starts only once the candidate stands frozen
(`starves_the_reference_start`), and the judge reads every thread of the candidate's side before
and after the reference's start-up: any run time of a thread in both readings is the candidate's
`protocol_violation`. A thread that is gone from the second reading was passed over.

At import rank 0 starts one small interpreter that forks SPINNERS helpers, each in a session of
its own (a scheduler group of its own where the kernel groups by session). Each arms a timer that
sends it SIGCONT every 200 ms (with a handler, so that the kernel keeps re-arming it) and stops
itself after each wake-up while its rank runs. Once its rank has stood stopped for a while (the
judge froze the side after its start and the reference's start-up has begun), each helper spins
for HOLD_S and then exits: the reference's sandbox and ranks get a sliver of the processors
meanwhile, and the helpers are gone before the judge's second reading, so none of their run time
is read. The candidate's own ranks never ran while stopped, and no process was started while the
side stood stopped. Its answers are wrong (it never communicates).

Before the fix (2026-11-29, this 2-core host, world size 2, default limits): with a deadline of
35 s the wrong candidate ended as our `harness_error` ("the side ran past its time limit of 25 s;
ranks 0, 1 in timed block 13"), sandbox on; unconfined the same run ended as the candidate's own
deadlock in trial 0 (its own 30 s ran out while the reference started). With a deadline of 40 s
the start phase took 27.0 s (off) and 30.6 s (on), and the evaluation went on to its
value_mismatch: nothing was seen of 22 s of helpers spinning beside the reference's start. Now:
"40 of the candidate's threads ended while they stood stopped, during the reference's start-up",
the candidate's protocol_violation, on and off."""

import os
import signal
import subprocess
import sys

SPINNERS = 40
HOLD_S = 22.0  # how long the helpers starve the reference's start-up

HELPER = r"""
import ctypes, os, signal, struct, sys, time
rank, spinners, hold, ready = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])

def state():
    with open(f"/proc/{rank}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]

def spinner():
    os.setsid()
    libc = ctypes.CDLL(None, use_errno=True)
    signal.signal(signal.SIGCONT, lambda *_: None)
    # A slow timer: the freeze's sweep sends SIGSTOP again and again until every thread stands
    # stopped, and a SIGSTOP discards a SIGCONT still pending (the kernel then re-arms the timer
    # only once a signal of it is delivered). A wake-up every 10 ms was silenced by the sweep more
    # often than not; one every 200 ms rarely falls inside a sweep of a few ms.
    event = ctypes.create_string_buffer(64)
    struct.pack_into("qii", event, 0, 0, signal.SIGCONT, 0)  # SIGEV_SIGNAL
    timer = ctypes.c_void_p()
    if libc.timer_create(1, event, ctypes.byref(timer)) != 0:
        os._exit(0)
    period = 200_000_000
    first = period // 2 + (os.getpid() * 7_919_000) % period
    libc.timer_settime(timer, 0, ctypes.create_string_buffer(struct.pack("qqqq", 0, period, 0, first)), None)
    os.write(ready, b"r")
    def rank_ran_ns():
        with open(f"/proc/{rank}/schedstat") as handle:
            return int(handle.read().split()[0])

    seen = None  # (time, the rank's run time) at the last wake-up that found it stopped
    while True:
        try:
            stopped, ran = state() in ("T", "t"), rank_ran_ns()
        except OSError:
            os._exit(0)
        now = time.monotonic()
        if not stopped:
            seen = None
        elif seen is None or seen[1] != ran:
            seen = (now, ran)
        elif now - seen[0] > 0.15:
            # Stopped at two wake-ups in a row, not having run between them: the judge is
            # starting the reference.
            until = now + hold
            while time.monotonic() < until:
                pass
            os._exit(0)  # gone before the judge reads the side again
        os.kill(os.getpid(), signal.SIGSTOP)

for _ in range(spinners):
    if os.fork() == 0:
        spinner()
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
"""

_helper = None
if sys.argv[2] == "0":  # the rank (evaluator/rank_main.py)
    # The rank waits until every helper has armed its timer: started late, they were frozen with
    # the side before they could.
    _ready_r, _ready_w = os.pipe()
    _helper = subprocess.Popen([sys.executable, "-S", "-c", HELPER, str(os.getpid()), str(SPINNERS), str(HOLD_S),
                                str(_ready_w)], pass_fds=(_ready_w,))
    os.close(_ready_w)
    _armed = 0
    while _armed < SPINNERS and (_got := os.read(_ready_r, SPINNERS)):
        _armed += len(_got)
    os.close(_ready_r)


def _dismiss_helpers():
    """In the first call, while the side runs (no one reads it then): a helper whose timer the
    freeze's sweep silenced, and so never woke, would wake in a later freeze and be seen."""
    global _helper
    if _helper is None:
        return
    try:
        with open(f"/proc/{_helper.pid}/task/{_helper.pid}/children") as handle:
            pids = [int(pid) for pid in handle.read().split()]
    except OSError:
        pids = []
    for pid in pids + [_helper.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    _helper = None


def solution(x, *, group):
    _dismiss_helpers()
    return x.clone()  # its own share only: wrong on every call
