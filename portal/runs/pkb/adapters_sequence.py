"""ParallelKernelBench adapters: Sequence, context and expert parallelism: Ulysses all-to-alls, uneven all-gather, ring attention, MoE dispatch and combine, vocab-parallel log-probs.

See adapter.py for what an adapter is; adapters.py gathers every family's."""

from __future__ import annotations

from .adapter import Adapter

ADAPTERS: tuple[Adapter, ...] = ()
