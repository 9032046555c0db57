"""Whether a side left work on its GPUs: the judge's own probe kernel, timed by the judge.

Stopping a side's processes stops its CPU threads, not what they queued on a GPU. Before it stops
a side's clock, and so before the other side runs, the judge launches a tiny kernel of its own on
each of the side's GPUs and waits for it: on an idle GPU it completes in tens of microseconds;
with another process's work running it waits for time slices (measured on an H200 with a stopped
process's matmuls queued: 2.42 ms against 0.038 ms idle, docs/judge.md). So the judge keeps its
clock running until every GPU answers its probe as fast as when idle: work left in flight is on
the side's clock, and work that never ends fails the side.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional

import torch

# A probe slower than this many times the idle one, and than FLOOR_S, means the GPU is busy.
BUSY_MULTIPLE = 10
FLOOR_S = 2e-4
SAMPLES = 15


class DeviceQuiet:
    def __init__(self, devices: list[int], probe: Optional[Callable[[int], float]] = None) -> None:
        """``probe``: seconds one probe of a device took (default: the judge's CUDA kernel)."""
        self.devices = devices
        if probe is None:
            probe = _KernelProbe(devices)
        self.probe = probe
        for d in devices:
            self.probe(d)  # the first launch loads the kernel
        self.idle_s = {d: statistics.median(self.probe(d) for _ in range(SAMPLES)) for d in devices}
        self.limit_s = {d: max(BUSY_MULTIPLE * self.idle_s[d], FLOOR_S) for d in devices}
        self.waited_s = 0.0  # over the whole evaluation: how long sides left work behind

    def busy_device(self) -> Optional[int]:
        for device in self.devices:
            if self.probe(device) > self.limit_s[device]:
                return device
        return None

    def wait(self, within_s: float) -> Optional[int]:
        """Wait until every GPU is idle; the GPU still busy after ``within_s`` (None: all quiet)."""
        started = time.perf_counter()
        while (busy := self.busy_device()) is not None:
            if time.perf_counter() - started > within_s:
                return busy
            time.sleep(1e-4)
        self.waited_s += time.perf_counter() - started
        return None

    def describe(self) -> dict[str, float]:
        return {"idle_probe_us": round(1e6 * max(self.idle_s.values()), 1),
                "busy_above_us": round(1e6 * max(self.limit_s.values()), 1),
                "waited_for_quiet_ms": round(1e3 * self.waited_s, 3)}


class _KernelProbe:
    """A tiny kernel on the judge's own stream of each GPU, timed from launch to completion."""

    def __init__(self, devices: list[int]) -> None:
        self.scratch = {d: torch.zeros(256, device=f"cuda:{d}") for d in devices}
        self.streams = {d: torch.cuda.Stream(device=d) for d in devices}

    def __call__(self, device: int) -> float:
        done = torch.cuda.Event()
        with torch.cuda.device(device), torch.cuda.stream(self.streams[device]):
            started = time.perf_counter()
            self.scratch[device].add_(1)
            done.record()
        while not done.query():
            pass
        return time.perf_counter() - started
