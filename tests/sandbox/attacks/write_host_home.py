"""Writes into the home directory of the user running the evaluator (its absolute host path):
a dot file and a script under ~/.config. Without a private filesystem these would wait there for
the next login or tool that reads them."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
HOST_HOME = Path("__HOST_HOME__")
got_through: list[str] = []


def attack() -> None:
    for path in (HOST_HOME / f".{MARKER}", HOST_HOME / ".config" / f"{MARKER}.sh", HOST_HOME / f"{MARKER}.txt"):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"echo {MARKER}\n")
            got_through.append(f"wrote {path}")
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
