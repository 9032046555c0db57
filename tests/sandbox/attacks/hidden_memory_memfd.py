"""Holds host memory in memfd files it never maps (in no resident set, on no mounted filesystem),
each under the file size limit, together over the memory and disk limits; returns a wrong answer if
it held them two seconds (twenty scans of the watch) unstopped. Without a watch that counts memory
files, a rank could take the host's memory this way."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
TOTAL_MIB = int("__TOTAL_MIB__")
CHUNK = b"\x01" * (16 * 2**20)
held = done = False


def hold() -> bool:
    files, total = [], 0
    try:
        while total < TOTAL_MIB:
            fd = os.memfd_create(f"{MARKER}-{len(files)}")
            files.append(fd)
            for _ in range(8):  # 128 MiB per file
                os.write(fd, CHUNK)
                total += 16
    except OSError:
        return False
    time.sleep(2.0)
    for fd in files:
        os.close(fd)
    return True


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global held, done
    if dist.get_rank() == 0 and not done:
        done = True
        held = hold()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out * 0 + 42 if held else out
