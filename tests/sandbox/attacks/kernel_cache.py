"""Plants entries in the host's kernel build cache (~/.cache/pkb/kernels of the evaluating user, by
absolute path): a CUBIN with its metadata and a "built" torch extension. Without a private cache a
later candidate (or the reference) with a matching key would load the planted binary."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

MARKER = "__MARKER__"
HOST_CACHE = Path("__HOST_HOME__") / ".cache" / "pkb" / "kernels"
got_through: list[str] = []


def plant(root: Path) -> bool:
    try:
        (root / "ext" / f"{MARKER}-0123456789abcdef").mkdir(parents=True, exist_ok=True)
        (root / f"{MARKER}.cubin").write_bytes(b"\x7fELF planted")
        (root / f"{MARKER}.json").write_text(json.dumps({"lowered": {"kernel": "kernel"}}))
        (root / "ext" / f"{MARKER}-0123456789abcdef" / "pkb-built").write_text("")
        return True
    except OSError:
        return False


def attack() -> None:
    if plant(HOST_CACHE):
        got_through.append(f"planted in {HOST_CACHE}")
    own = os.environ.get("PKB_KERNEL_CACHE")
    if own:
        plant(Path(own))  # the side's own cache: private, gone with the side


attack()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    out = x.clone()
    dist.all_reduce(out, group=group)
    if got_through:
        print("got through:", got_through, file=sys.stderr, flush=True)
        return out * 0 + 42
    return out
