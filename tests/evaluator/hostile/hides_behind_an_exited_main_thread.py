"""Attack (all-reduce): run beside the reference in a process whose main thread has exited.

When a process's main thread ends alone (the exit system call, not exit_group) while its other
threads go on, the kernel keeps the main thread as a zombie until the last one ends, and
/proc/PID/stat, which describes the process by its main thread, says "Z". The judge read a
stopped side's threads' run times (``liveness.thread_run_ns``) process by process and passed
over a process whose stat said Z ("exited already: its time is final"): none of its living
threads was read, around the reference's blocks, during the reference's start-up or in the
candidate's own window after its answers. So rank 0 starts a helper whose worker thread arms
SIGCONT timers (as wakes_itself_while_frozen does) and whose main thread then exits. Woken while
its rank stands stopped, the worker spins 2 ms, at most 4 ms a stretch (/proc's ticks, read per
process, must not grow by 20 ms across a reference block), and stops itself again.

Before the fix it passed 4 runs of 5 (sandbox on, this loaded 2-core host: 1.01x, 1.18x, 1.31x,
1.36x, an exact copy of the reference; the fifth was caught by the ticks). Unbounded work would
take more (burner processes forked while stopped, reaped by the kernel), but their births are
visible for the moment their own main thread lives, and the judge caught them.
"""

import os
import subprocess
import sys
import time

import torch.distributed as dist

HELPER = r"""
import ctypes, os, signal, struct, sys, threading, time
rank = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
# A handler, so that the timer's SIGCONT is delivered, not dropped as ignored: the kernel re-arms
# a periodic timer only once its signal is delivered.
signal.signal(signal.SIGCONT, lambda *_: None)
SPIN_S, STRETCH_S = 0.002, 0.004

def stopped():
    with open(f"/proc/{rank}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] in ("T", "t")

def worker():
    event = ctypes.create_string_buffer(64)
    struct.pack_into("qii", event, 0, 0, signal.SIGCONT, 0)  # SIGEV_SIGNAL to the process
    # Two timers, both armed again at every wake: a stop signal (the freeze's, our own) flushes a
    # SIGCONT not yet delivered, and a periodic timer whose signal was dropped fires no more.
    timers = [ctypes.c_void_p() for _ in range(2)]
    for timer in timers:
        if libc.timer_create(1, event, ctypes.byref(timer)) != 0:
            os._exit(0)
    periods = [ctypes.create_string_buffer(struct.pack("qqqq", 0, ns, 0, ns)) for ns in (5 * 10**6, 7 * 10**6)]
    off = ctypes.create_string_buffer(32)  # it_value 0: disarmed
    seen, spent = 0, 0.0  # wakes in a row that found the rank stopped; seconds spun since it ran
    while True:
        try:
            frozen = stopped()
        except OSError:
            os._exit(0)
        seen, spent = (seen + 1, spent) if frozen else (0, 0.0)
        # Not on the first wake after a freeze (the judge reads the side then), and a few ms a
        # stretch: /proc's ticks, read per process, must not grow by 20 ms while the rank stands.
        if seen >= 2 and spent < STRETCH_S:
            end = time.thread_time() + SPIN_S
            while time.thread_time() < end:
                pass
            spent += SPIN_S
        # Spent: no more wakes (each costs system time) until the judge's own thaw continues us.
        for timer, period in zip(timers, periods):
            libc.timer_settime(timer, 0, off if frozen and spent >= STRETCH_S else period, None)
        os.kill(os.getpid(), signal.SIGSTOP)

threading.Thread(target=worker).start()
os.write(int(sys.argv[2]), b"r")
libc.syscall(60, 0)  # SYS_exit (x86_64): the main thread alone ends; /proc/PID/stat now says Z
"""

if sys.argv[2] == "0":  # the rank (evaluator/rank_main.py)
    # One helper: /proc's ticks are read per process and summed, and one process that runs
    # under 10 ms while the side stands stopped never moves them by the 20 ms the judge checks.
    _ready, _ready_w = os.pipe()
    _helper = subprocess.Popen([sys.executable, "-S", "-c", HELPER, str(os.getpid()), str(_ready_w)],
                               pass_fds=(_ready_w,))
    os.close(_ready_w)
    os.read(_ready, 1)
    time.sleep(0.05)  # its main thread gone before the judge first reads the side


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
