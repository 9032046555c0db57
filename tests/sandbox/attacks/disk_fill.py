"""Writes 20 GB in 64 MiB chunks to every writable place it finds (work folder, /tmp, /dev/shm,
home), ignoring errors, and keeps trying. Without a size-limited filesystem of its own it would fill
the host's disk or memory-backed /dev/shm."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
CHUNK = b"\xa5" * (64 * 2**20)
TOTAL = 20 * 10**9


def fill() -> None:
    written = 0
    for folder in (os.getcwd(), "/tmp", "/dev/shm", os.path.expanduser("~")):
        for part in range(1000):
            if written >= TOTAL:
                return
            try:
                with open(os.path.join(folder, f"{MARKER}.{part}.fill"), "wb") as handle:
                    for _ in range(16):
                        handle.write(CHUNK)
                        written += len(CHUNK)
            except OSError:
                break  # this folder is full: the next one


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    end = time.monotonic() + 30
    while time.monotonic() < end:  # what someone else frees is filled again
        fill()
        time.sleep(0.05)
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
