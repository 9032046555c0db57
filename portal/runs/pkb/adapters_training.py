"""ParallelKernelBench adapters: Data-parallel, ZeRO and FSDP training steps, FSDP x TP, tensor-parallel column linear with gathered output.

See adapter.py for what an adapter is; adapters.py gathers every family's."""

from __future__ import annotations

from .adapter import Adapter

ADAPTERS: tuple[Adapter, ...] = ()
