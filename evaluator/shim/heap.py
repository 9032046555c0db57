"""The rank's output heap: GPU memory the judge has mapped, where a block's outputs are allocated.

Released by block on GPUs (``--judge-release block``), the shim enters a torch ``MemPool`` over
this heap around each call, so whatever the candidate's thread allocates in the call (its outputs
among it) comes from memory the judge reads through its own mapping. An output found here is
handed to the judge as an offset, kept alive until the next block, and read in place once the
side stands frozen: no copy into a slot on the clock (0.013-0.036 ms a call on one H200, against
0.0016-0.0038 ms for the pool; docs/judge.md "Outputs read where the candidate left them").

The pool's allocator hands out the heap through ctypes callbacks (no compiler in the rank): the
caching allocator keeps the segments it gets and reuses them from block to block, and segments it
gives back are handed out again (first fit). When the heap has no room, segments come from the
driver's own ``cuMemAlloc``, outputs in them take the slot copy, and the pool is not entered again
(``allocating``): a candidate that allocates past the heap pays that copy, it never fails for it. (Refusing the request instead, for the
caching allocator to give back its unused segments and retry, raised out-of-memory at once on one
H200 with torch 2.11: the retry never reached the pool's allocator; scripts/gpu/heap_probe.py.)
Nothing here is trusted: an offset the rank hands over is bounds-checked by the judge
(judge/buffers.py), and values are judged like any other output.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any, Optional

import torch

from ..shared_memory import SharedMemory
from ..wire import HEAP_SEGMENT, round_up

_ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)


class HeapRange:
    """Where the heap lies in this process: which tensors' bytes are all inside it."""

    def __init__(self, memory: SharedMemory) -> None:
        self.memory = memory
        self.base = memory.view(0, 1).data_ptr()
        self.size = memory.size

    def offset_of(self, tensor: Any) -> Optional[int]:
        """Where a contiguous tensor's bytes lie in the heap, or None if not all of them do."""
        if tensor.device != self.memory.torch_device or not tensor.is_contiguous():
            return None
        start = tensor.data_ptr() - self.base
        nbytes = tensor.numel() * tensor.element_size()
        return start if 0 <= start and start + nbytes <= self.size else None

    def allocating(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def recycle(self) -> None:
        """After the last block's outputs are let go (no pool here: nothing to do)."""


class HeapSpace:
    """Which offsets of the heap are handed out: segments first fit from those given back, else
    from the part never used."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._next = 0  # the heap past here was never handed out
        self._free: list[tuple[int, int]] = []  # (offset, size) given back by the pool

    def take(self, size: int) -> Optional[int]:
        taken = round_up(size, HEAP_SEGMENT)
        for i, (offset, free) in enumerate(self._free):
            if free >= taken:
                self._free[i:i + 1] = [(offset + taken, free - taken)] if free > taken else []
                return offset
        offset = round_up(self._next, HEAP_SEGMENT)
        if offset + taken > self.size:
            return None
        self._next = offset + taken
        return offset

    def give_back(self, offset: int, size: int) -> None:
        self._free.append((offset, round_up(size, HEAP_SEGMENT)))


class OutputHeap(HeapRange):
    """The heap with a pool over it: a call's allocations come from it."""

    def __init__(self, memory: SharedMemory) -> None:
        super().__init__(memory)
        self.space = HeapSpace(self.size)
        self._outside: set[int] = set()  # segments from cuMemAlloc, once the heap ran dry
        # What the pool asked for (scripts/gpu/heap_probe.py prints it): segments from the heap,
        # segments from outside, segments given back.
        self.counts = {"heap": 0, "outside": 0, "given_back": 0}
        self.trace: Optional[list[tuple[str, int, int]]] = None  # every call, when a probe asks
        self._driver = ctypes.CDLL("libcuda.so.1")
        self._alloc_cb = _ALLOC_FN(self._alloc)  # kept alive as long as the pool
        self._free_cb = _FREE_FN(self._free)
        allocator = torch._C._cuda_customAllocator(ctypes.cast(self._alloc_cb, ctypes.c_void_p).value,
                                                   ctypes.cast(self._free_cb, ctypes.c_void_p).value)
        self.pool = torch.cuda.MemPool(allocator=allocator)

    def _alloc(self, size: int, device: int, stream: int) -> int:
        ptr = self._place(size)
        if self.trace is not None:
            self.trace.append(("alloc", size, ptr - self.base if ptr else -1))
        return ptr

    def _place(self, size: int) -> int:
        offset = self.space.take(size)
        if offset is not None:
            self.counts["heap"] += 1
            return self.base + offset
        ptr = ctypes.c_uint64()
        if self._driver.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) != 0:
            return 0  # torch raises its out-of-memory error: the device itself is full
        self.counts["outside"] += 1
        self._outside.add(ptr.value)
        return ptr.value

    def _free(self, ptr: int, size: int, device: int, stream: int) -> None:
        if self.trace is not None:
            self.trace.append(("free", size, ptr - self.base))
        self.counts["given_back"] += 1
        if ptr in self._outside:
            self._outside.discard(ptr)
            self._driver.cuMemFree_v2(ctypes.c_uint64(ptr))
        elif self.base <= ptr < self.base + self.size:
            self.space.give_back(ptr - self.base, size)

    def recycle(self) -> None:
        """One allocation outside the pool, once the last block's outputs are let go: the caching
        allocator then processes the events of blocks that other streams used (a collective's)
        and returns them to the pool. Inside the pool it defers them, as during a graph capture:
        with no allocation outside, the pool reused no segment over gloo on one H200 and took a
        new 64 MiB one every call; with this one, 28 segments served every block of 28 calls
        (scripts/gpu/heap_probe.py --nudge)."""
        torch.empty(1, device=self.memory.torch_device)

    def allocating(self) -> contextlib.AbstractContextManager[None]:
        """The pool around a call, until the heap has run dry once: from then on the candidate
        allocates as it would with no heap. Should the pool still not reuse its segments (a
        candidate that frees its outputs only inside a call, say), staying in it would grow the
        candidate's memory by a segment a call, outside the heap."""
        if self.counts["outside"]:
            return contextlib.nullcontext()
        return torch.cuda.use_mem_pool(self.pool)
