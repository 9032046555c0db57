"""The rank's output heap (evaluator/shim/heap.py): which offsets its allocator hands out.

The pool over it runs only on GPUs (scripts/gpu/judge_outside_smoke.sh with JUDGE_RELEASE=block,
docs/judge.md); its bookkeeping is plain arithmetic, checked here."""

from __future__ import annotations

from evaluator.shim.heap import HeapSpace
from evaluator.wire import HEAP_SEGMENT as SEGMENT


def test_segments_are_handed_out_aligned_and_never_twice():
    space = HeapSpace(8 * SEGMENT)
    offsets = [space.take(100), space.take(SEGMENT + 1), space.take(SEGMENT)]
    assert offsets == [0, SEGMENT, 3 * SEGMENT]
    assert space.take(5 * SEGMENT) is None  # 4 of the 8 left


def test_segments_given_back_are_handed_out_again_first_fit_and_split():
    space = HeapSpace(4 * SEGMENT)
    first, second = space.take(2 * SEGMENT), space.take(2 * SEGMENT)
    assert space.take(1) is None
    space.give_back(first, 2 * SEGMENT)
    assert space.take(SEGMENT) == first
    assert space.take(SEGMENT) == first + SEGMENT  # the rest of the same span
    assert space.take(1) is None
    space.give_back(second, 2 * SEGMENT)
    assert space.take(2 * SEGMENT) == second


def test_once_the_heap_has_run_dry_calls_allocate_as_they_would_without_it():
    """Past the heap the pool's segments come from outside and may never be reused (gloo on one
    H200: a new 64 MiB segment every call), so the shim stops entering it."""
    import contextlib

    from evaluator.shim.heap import OutputHeap

    heap = object.__new__(OutputHeap)  # the bookkeeping alone: its pool needs a GPU
    heap.counts = {"heap": 58, "outside": 1, "given_back": 0}
    heap.pool = None
    assert isinstance(heap.allocating(), contextlib.nullcontext)
