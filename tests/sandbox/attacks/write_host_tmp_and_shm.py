"""Drops files in /tmp, /dev/shm and /var/tmp, and checks whether those are the host's: the test left
a flag file in the host's /tmp and /dev/shm. Without a private /tmp and /dev/shm the flags would be
visible and the dropped files would stay on the host for other users and later runs."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
FLAGS = ("__TMP_FLAG__", "__SHM_FLAG__")
got_through: list[str] = []


def attack() -> None:
    for folder in ("/tmp", "/dev/shm", "/var/tmp"):
        try:
            with open(os.path.join(folder, f"{MARKER}.drop"), "w") as handle:
                handle.write("dropped\n")
        except OSError:
            pass
    for flag in FLAGS:
        if os.path.exists(flag):
            got_through.append(f"sees the host's {flag}")


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
