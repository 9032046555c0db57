"""The classic daemon: fork, setsid, fork again, chdir /, close every descriptor, ignore SIGTERM and
SIGHUP, exec a helper named after the marker. Without a PID namespace the daemon is re-parented to
the host's init and outlives the evaluation."""

from __future__ import annotations

import os
import signal
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
LINGER = ("import signal, time\n"
          "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
          "time.sleep(600)\n")


def daemonize() -> int:
    child = os.fork()
    if child != 0:
        return child
    try:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        os.chdir("/")
        os.umask(0)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 65536)
        os.execv(sys.executable, [sys.executable, "-c", LINGER, MARKER])
    finally:
        os._exit(1)


os.waitpid(daemonize(), 0)  # the first child exits at once; the daemon is its orphan


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
