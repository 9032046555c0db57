"""kill(-1, SIGKILL): every process the candidate may signal. Without a PID namespace and a uid of
its own that is every process of the evaluator's user (the evaluator, the worker, the test's
canary); inside the sandbox it can only reach its own side (its peer rank dies)."""

from __future__ import annotations

import os
import signal

import torch
import torch.distributed as dist

if os.getuid() == 0:
    # Not the attack: a guard for the machine running this suite. Ranks never run as root in the
    # sandbox; if they do, this sweep would take the host down with it.
    raise SystemExit("refusing to sweep as root")
os.kill(-1, signal.SIGKILL)


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
