"""Mounts and fills a tmpfs of its own inside a new user and mount namespace (unshare -Urm), host
memory that is neither on the side's size-limited filesystem nor in any resident set; returns a wrong
answer if it held it two seconds unstopped. Where ranks may create namespaces, no disk or memory
limit would see it."""

from __future__ import annotations

import subprocess

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
FILES = int("__FILES__")
FILE_MIB = int("__FILE_MIB__")
SCRIPT = (f"mount -t tmpfs -o size=64g {MARKER} /tmp || exit 3; "
          f"for i in $(seq {FILES}); do head -c {FILE_MIB}M /dev/zero > /tmp/$i || exit 9; done; sleep 2")
held = done = False


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    global held, done
    if dist.get_rank() == 0 and not done:
        done = True
        try:
            held = subprocess.run(["unshare", "-Urm", "sh", "-c", SCRIPT], capture_output=True,
                                  timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            held = False
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out * 0 + 42 if held else out
