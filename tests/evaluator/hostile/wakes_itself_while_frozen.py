"""Attack (all-reduce): escape the freeze without dying. A SIGCONT continues a stopped process
when it is sent, not when it is delivered, and a timer the process armed before it was stopped
still sends it. A helper arms a timer that sends itself SIGCONT every 10 ms; woken while its
rank stands stopped (the reference's turn), it spins for 2 ms and stops itself again, so that
every sweep of the freeze finds it stopped; woken while its rank runs, it stops at once. The
judge saw a frozen side's work only in /proc's processor times, counted in 10 ms ticks, from 20
ms per reference block: before the fix this ran beside every reference block unseen (a few ms
of a core each, on this 2-core host a share of the reference's processors) and passed."""

import os
import subprocess
import sys

import torch.distributed as dist

HELPER = r"""
import ctypes, os, signal, struct, sys, time
rank = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
# A handler of its own: SIGCONT left at its default disposition counts as ignored, and this host's
# kernel (6.18) then stops re-arming a timer whose signal is ignored. Without it the timer woke
# the helper 8 times in a whole evaluation, not every 10 ms, and the attack mostly did nothing
# (unconfined, "three runs, none caught" in 2 of 6 runs of its test); with it, 127 wake-ups.
signal.signal(signal.SIGCONT, lambda *_: None)
event = ctypes.create_string_buffer(64)
struct.pack_into("qii", event, 0, 0, signal.SIGCONT, 0)  # SIGEV_SIGNAL
timer = ctypes.c_void_p()
if libc.timer_create(1, event, ctypes.byref(timer)) != 0:
    sys.exit(0)
libc.timer_settime(timer, 0, ctypes.create_string_buffer(struct.pack("qqqq", 0, 10**7, 0, 10**7)), None)

def state():
    with open(f"/proc/{rank}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]

while True:
    try:
        stopped = state() in ("T", "t")
    except OSError:
        sys.exit(0)
    if stopped:
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass
    os.kill(os.getpid(), signal.SIGSTOP)
"""

_helper = subprocess.Popen([sys.executable, "-S", "-c", HELPER, str(os.getpid())])


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
