"""Holds host memory in helpers that each unshare a user namespace of their own, each under the
per-rank memory limit and together over it (a watch that sums memory per known namespace would miss
them); returns a wrong answer if they held it two seconds unstopped. With OWN_NAMESPACES "no" the same
helpers stay in the rank's namespace: the control, which the watch must catch."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
HELPERS = int("__HELPERS__")
HELPER_MIB = int("__HELPER_MIB__")
OWN_NAMESPACES = "__OWN_NAMESPACES__" == "yes"
HOLD = (f"import sys, time\nhoard = b'\\x01' * ({HELPER_MIB} * 2**20)\n"
        "print('holding', flush=True)\ntime.sleep(120)\n")
CLONE_NEWUSER = 0x10000000


def own_user_namespace() -> None:
    if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER) != 0:
        os._exit(17)  # refused: no helper at all, rather than one the watch would count


held = done = False


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global held, done
    if dist.get_rank() == 0 and not done:
        done = True
        helpers = [subprocess.Popen([sys.executable, "-I", "-c", HOLD, MARKER], stdout=subprocess.PIPE,
                                    preexec_fn=own_user_namespace if OWN_NAMESPACES else None)
                   for _ in range(HELPERS)]
        holding = sum(helper.stdout.readline() == b"holding\n" for helper in helpers)
        time.sleep(2.0)
        held = holding == HELPERS and all(helper.poll() is None for helper in helpers)
        for helper in helpers:
            helper.kill()
            helper.wait()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out * 0 + 42 if held else out
