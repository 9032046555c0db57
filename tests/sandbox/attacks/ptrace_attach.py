"""ptrace(PTRACE_ATTACH) through ctypes: pid 1, the parent, the host pids of the evaluator and of a
process the test started, and every other visible pid. Without a PID namespace and a non-dumpable
init, attaching the evaluator or the sandbox's init would give the candidate their memory and
registers (and stop them)."""

from __future__ import annotations

import ctypes
import os
import sys

import torch
import torch.distributed as dist

PTRACE_ATTACH, PTRACE_DETACH, WALL = 16, 17, 0x40000000
TEST_PID, CANARY_PID = int("__TEST_PID__"), int("__CANARY_PID__")
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
got_through: list[str] = []
peers: list[int] = []


def is_peer_rank(pid: int) -> bool:
    """Another rank of this side runs the same candidate: tracing it gains nothing."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"evaluator.rank_main" in handle.read()
    except OSError:
        return False


def attach(pid: int) -> bool:
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        return False
    os.waitpid(pid, WALL)
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    return True


def attack(rank: int) -> None:
    targets = {1, os.getppid(), TEST_PID, CANARY_PID}
    if rank == 0:  # two ranks tracing each other at once would stop both for good
        targets |= {int(p) for p in os.listdir("/proc") if p.isdigit()}
    for pid in sorted(targets - {os.getpid()}):
        peer = pid not in (1, os.getppid(), TEST_PID, CANARY_PID) and is_peer_rank(pid)
        if attach(pid):
            (peers if peer else got_through).append(pid)


done = False


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global done
    if not done:
        done = True
        attack(dist.get_rank())
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print(f"attached {got_through} (peers {peers})", file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
