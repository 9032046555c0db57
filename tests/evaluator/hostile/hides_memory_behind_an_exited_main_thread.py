"""Attack (all-reduce): hold host memory the side's watch does not see.

The init watches each rank's host memory (sandbox/watch.py ``usage_by_namespace``): every
process's resident set from /proc/PID/status, and every fifth scan the memory files in its fd
folder. When a process's main thread has ended alone (the exit system call) while another goes
on, that status describes the exited main thread: no VmRSS line, and an empty fd folder. So at
import rank 0 starts two helpers whose main thread ends at once; their other thread then fills
1.2 GiB and sleeps. On CPU each process also has an address-space limit of the rank's share,
which is why two. Before the fix, under a 2 GiB limit per rank, the rank held 2.4 GiB in them
beside its own and passed (2 runs of 2); on GPU hosts, with no cgroup, the watch is the only cap
on a side's host memory.
"""

import os
import subprocess
import sys

import torch.distributed as dist

HELPER = r"""
import ctypes, os, sys, threading, time

def hold():
    time.sleep(0.2)  # the main thread gone first: while it lives, the process's status shows all
    data = b"\x01" * (1200 << 20)  # resident: every page written
    os.write(int(sys.argv[1]), b"r")
    time.sleep(10**6)

threading.Thread(target=hold).start()
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit (x86_64): the main thread alone ends
"""

if sys.argv[2] == "0":  # the rank (evaluator/rank_main.py)
    _ready, _ready_w = os.pipe()
    _helpers = [subprocess.Popen([sys.executable, "-S", "-c", HELPER, str(_ready_w)], pass_fds=(_ready_w,))
                for _ in range(2)]
    os.close(_ready_w)
    for _ in _helpers:
        os.read(_ready, 1)


def solution(x, *, group):
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
