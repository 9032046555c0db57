"""ParallelKernelBench adapters: Graphs, spatial and scientific codes, vision: halo exchanges, GraphBolt/GraphStorm, distributed rFFT, DeePMD, MAGI-1, DINOv2, iBOT, SAM 3.

See adapter.py for what an adapter is; adapters.py gathers every family's."""

from __future__ import annotations

from .adapter import Adapter

ADAPTERS: tuple[Adapter, ...] = ()
