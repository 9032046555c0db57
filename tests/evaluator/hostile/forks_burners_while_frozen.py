"""Attack (all-reduce): work beside the reference in processes that are gone before the judge looks.

The judge reads a stopped side's threads' run times before and after each stretch the other side
runs (its timed blocks, its start-up: from 1 ms is the candidate's protocol_violation), its
processes' processor time in /proc's ticks (from 20 ms), and counts the threads that were there
before and are gone after. A process born after the first reading and gone before the second is
in none of them, and one whose parent ignores SIGCHLD is reaped by the kernel with its time
credited to no one. So rank 0 starts a helper that ignores SIGCHLD and arms a SIGCONT timer every
50 ms (as wakes_itself_while_frozen does). On its second wake in a stretch of its rank standing
stopped (the first stretch is the reference's start-up, seconds long), it spawns two burners (one
per core of this host; a vfork: the helper does not run while they load) and stops itself for
good: well under a ms of its own run time. The burners spin 0.3 s and exit.

Before the fix this ran 0.6 s of processor beside the reference's start-up in none of the judge's
readings (6 runs of 6, sandbox on). Aimed at the reference's timed blocks instead (a one-shot
timer set from the candidate's block end, burners of a few ms), it was fragile: the block
readings caught 3 runs of 4, the fourth passed at 0.97x.
"""

import os
import subprocess
import sys

import torch.distributed as dist

HELPER = r"""
import ctypes, os, signal, struct, sys, time
rank = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel, their time with them
signal.signal(signal.SIGCONT, lambda *_: None)  # delivered, so that the timer fires again
BURNERS, BURN_S = 2, 0.3
event = ctypes.create_string_buffer(64)
struct.pack_into("qii", event, 0, 0, signal.SIGCONT, 0)  # SIGEV_SIGNAL to the process
timer = ctypes.c_void_p()
if libc.timer_create(1, event, ctypes.byref(timer)) != 0:
    os._exit(0)
period = ctypes.create_string_buffer(struct.pack("qqqq", 0, 5 * 10**7, 0, 5 * 10**7))
off = ctypes.create_string_buffer(32)  # it_value 0: disarmed

def stopped():
    with open(f"/proc/{rank}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] in ("T", "t")

BURNER = "import sys, time\nend = time.thread_time() + float(sys.argv[1])\nwhile time.thread_time() < end: pass"

def spawn_burners():
    # posix_spawn starts each child with a vfork: the helper sleeps while the child loads, and
    # its own run time is the spawn call's (tens of microseconds).
    for _ in range(BURNERS):
        os.posix_spawn(sys.executable, [sys.executable, "-S", "-c", BURNER, str(BURN_S)], {})

os.write(int(sys.argv[2]), b"r")
seen, done = 0, False  # wakes in a row that found the rank stopped; whether the burners went out
while True:
    try:
        frozen = stopped()
    except OSError:
        os._exit(0)
    seen = seen + 1 if frozen else 0
    if seen == 2 and not done:
        done = True
        spawn_burners()
    # Armed again at every wake (a stop signal flushes a SIGCONT not yet delivered, and a timer whose
    # signal was dropped fires no more); once the burners are out, never again: the judge's thaws
    # continue us, and we stop at once.
    libc.timer_settime(timer, 0, off if done else period, None)
    os.kill(os.getpid(), signal.SIGSTOP)
"""

if sys.argv[2] == "0":  # the rank (evaluator/rank_main.py)
    _ready, _ready_w = os.pipe()
    _helper = subprocess.Popen([sys.executable, "-S", "-c", HELPER, str(os.getpid()), str(_ready_w)],
                               pass_fds=(_ready_w,))
    os.close(_ready_w)
    os.read(_ready, 1)


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
