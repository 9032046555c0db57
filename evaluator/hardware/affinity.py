"""Which CPU cores are local to each rank's GPU (its NUMA node), for pinning the rank there.

A rank whose host thread runs on the far socket pays a cross-socket hop on every launch and
synchronize, and one that the scheduler moves between cores mid-run times differently from one
that stays: both sides' rank r are pinned to the cores of GPU r's node.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from .clocks import visible_gpus
from .smi import run_smi


def parse_cpulist(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus += range(int(low), int(high or low) + 1)
    return cpus


def _bus_ids() -> dict[int, str]:
    text = run_smi("--query-gpu=index,pci.bus_id", "--format=csv,noheader", timeout=10.0) or ""
    found = {}
    for line in text.strip().splitlines():
        index, _, bus = (c.strip() for c in line.partition(","))
        if index.isdigit() and bus:
            # nvidia-smi writes an 8-digit PCI domain (00000000:18:00.0); sysfs uses 4, lower case.
            domain, _, rest = bus.partition(":")
            found[int(index)] = f"{domain[-4:]}:{rest}".lower()
    return found


def rank_cpus(world_size: int, sysfs: Path = Path("/sys/bus/pci/devices")) -> Optional[dict[str, list[int]]]:
    """rank -> the cores of its GPU's NUMA node that this process may use; None if unknown."""
    buses = _bus_ids()
    allowed = os.sched_getaffinity(0)
    gpus = visible_gpus(world_size)
    result: dict[str, list[int]] = {}
    for rank in range(world_size):
        bus = buses.get(gpus[rank % len(gpus)]) if gpus else None
        try:
            local = parse_cpulist((sysfs / bus / "local_cpulist").read_text()) if bus else []
        except OSError:
            local = []
        cpus = sorted(set(local) & allowed)
        if not cpus:
            return None
        result[str(rank)] = cpus
    return result
