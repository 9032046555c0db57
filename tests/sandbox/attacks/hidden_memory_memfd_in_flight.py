"""Holds host memory in memfd files that no process has open or mapped: each is sent over a unix
socket (SCM_RIGHTS) that nobody reads, then closed, so it lives on only in the socket's queue; returns
a wrong answer if it held them two seconds (twenty scans of the watch) unstopped. A watch of resident
memory, of open memory files and of the side's disk sees none of it."""

from __future__ import annotations

import os
import socket
import time

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
TOTAL_MIB = int("__TOTAL_MIB__")
CHUNK = b"\x01" * (16 * 2**20)
held = done = False


def hold() -> bool:
    unread, sender = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    total = 0
    try:
        while total < TOTAL_MIB:
            fd = os.memfd_create(f"{MARKER}-{total}")
            try:
                for _ in range(8):  # 128 MiB per file
                    os.write(fd, CHUNK)
                    total += 16
                socket.send_fds(sender, [b"x"], [fd])
            finally:
                os.close(fd)
    except OSError:
        return False
    time.sleep(2.0)
    unread.close()
    sender.close()
    return True


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global held, done
    if dist.get_rank() == 0 and not done:
        done = True
        held = hold()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out * 0 + 42 if held else out
