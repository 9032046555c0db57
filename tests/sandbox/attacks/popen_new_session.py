"""Starts a helper with subprocess.Popen(start_new_session=True) that ignores SIGTERM and SIGHUP and
is left running after the candidate returns. Without a PID namespace whose death takes everything
with it, the helper would outlive the evaluation (a miner, a listener, a later attack)."""

from __future__ import annotations

import subprocess
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
LINGER = ("import signal, time\n"
          "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
          "time.sleep(600)\n")
helper = subprocess.Popen([sys.executable, "-c", LINGER, MARKER], start_new_session=True,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
