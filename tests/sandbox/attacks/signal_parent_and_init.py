"""Signals its parent (getppid), pid 1 and the host pids of the evaluator and of a process the test
started: SIGSTOP, SIGTERM, SIGKILL and more. Without a PID namespace the parent is the evaluator
itself, so the evaluation (and the canary) would die or hang."""

from __future__ import annotations

import os
import signal
import sys

import torch
import torch.distributed as dist

TEST_PID, CANARY_PID = int("__TEST_PID__"), int("__CANARY_PID__")
SIGNALS = (signal.SIGSTOP, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGSEGV, signal.SIGALRM, signal.SIGKILL)
got_through: list[str] = []


def attack() -> None:
    for pid in (os.getppid(), 1):
        for sig in SIGNALS:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    for pid in (CANARY_PID, TEST_PID):
        for sig in SIGNALS:
            try:
                os.kill(pid, sig)
                got_through.append(f"{sig.name} to {pid}")
            except OSError:
                pass


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
