"""The reference's output files written beside its next trial, not after each one.

Where the reference re-checks into files (judged in the ranks, or judged outside with a ring too
short for the judge's slots: evaluator/judge/driver.py ``recheck``), each trial and checked timed
call it recomputes leaves two files: its outputs and the exact answer's residuals. On a
GPU host one 64 MiB output took 100 ms to save from one thread and 56 ms a save from four side by
side (`scripts/gpu/recheck_cost.py`, one H200 host, 2026-11-29), where the GPU work of a re-check
takes about 2 ms: the saves were the finish. Only the reference's rank uses this (its code is
ours), and only on GPUs, where the outputs held in flight are GPU memory; a CPU rank's memory is
capped and its cores are the evaluation's.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional

WRITERS = 4  # measured 1.0 / 0.68 / 0.56 of one thread's time a save with 1 / 2 / 4 threads
IN_FLIGHT = 2 * WRITERS  # saves queued at most: each holds a trial's outputs until written


class BackgroundSaves:
    def __init__(self, initializer: Optional[Callable[[], None]] = None) -> None:
        """``initializer``: run first in each writer thread (a rank's GPU made the thread's current
        device, which is per thread: nothing a save does may touch another GPU)."""
        self._initializer = initializer
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: list[Future[None]] = []

    def submit(self, save: Callable[[], None]) -> None:
        """Run ``save`` on a writer thread; past IN_FLIGHT queued, first wait for the oldest (and
        raise its error, if it failed)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="pkb-save",
                                            initializer=self._initializer)
        while len(self._pending) >= IN_FLIGHT:
            self._pending.pop(0).result()
        self._pending.append(self._pool.submit(save))

    def drain(self, quietly: bool = False) -> None:
        """Every save queued has ended: written, or the first error among them raised (kept
        back with ``quietly``, where another error is already on its way)."""
        pending, self._pending = self._pending, []
        errors = [f.exception() for f in pending]  # waits for each: none is left writing
        if (first := next((e for e in errors if e is not None), None)) is not None and not quietly:
            raise first
