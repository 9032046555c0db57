"""The rank's output heap: GPU memory the judge has mapped, where a block's outputs are allocated.

Released by block on GPUs (``--judge-release block``), the shim enters a torch ``MemPool`` over
this heap around each call, so whatever the candidate's thread allocates in the call (its outputs
among it) comes from memory the judge reads through its own mapping. An output found here is
handed to the judge as an offset, kept alive until the next block, and read in place once the
side stands frozen: no copy into a slot on the clock (0.013-0.036 ms a call on one H200, against
0.0016-0.0038 ms for the pool; docs/judge.md "Outputs read where the candidate left them").

The pool's allocator is a bump allocator over the heap, through ctypes callbacks (no compiler in
the rank): the caching allocator keeps the segments it gets and reuses them from block to block.
When the heap runs dry, segments come from the driver's own ``cuMemAlloc`` instead, and outputs
in them take the slot copy: a candidate that allocates past the heap pays that copy, it never
fails for it. Nothing here is trusted: an offset the rank hands over is bounds-checked by the
judge (judge/buffers.py), and values are judged like any other output.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any, Optional

import torch

from ..shared_memory import SharedMemory

SEGMENT = 2 << 20  # the caching allocator's large segments are 2 MiB multiples; align each to one
_ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


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


class OutputHeap(HeapRange):
    """The heap with a pool over it: a call's allocations come from it."""

    def __init__(self, memory: SharedMemory) -> None:
        super().__init__(memory)
        self._next = 0
        self._outside: set[int] = set()  # segments from cuMemAlloc, once the heap ran dry
        self._driver = ctypes.CDLL("libcuda.so.1")
        self._alloc_cb = _ALLOC_FN(self._alloc)  # kept alive as long as the pool
        self._free_cb = _FREE_FN(self._free)
        allocator = torch._C._cuda_customAllocator(ctypes.cast(self._alloc_cb, ctypes.c_void_p).value,
                                                   ctypes.cast(self._free_cb, ctypes.c_void_p).value)
        self.pool = torch.cuda.MemPool(allocator=allocator)

    def _alloc(self, size: int, device: int, stream: int) -> int:
        offset = _round_up(self._next, SEGMENT)
        if offset + size <= self.size:
            self._next = offset + size
            return self.base + offset
        ptr = ctypes.c_uint64()
        if self._driver.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) != 0:
            return 0  # torch raises its out-of-memory error: the device itself is full
        self._outside.add(ptr.value)
        return ptr.value

    def _free(self, ptr: int, size: int, device: int, stream: int) -> None:
        # The heap's segments are never handed back (a bump heap: the pool caches and reuses them).
        if ptr in self._outside:
            self._outside.discard(ptr)
            self._driver.cuMemFree_v2(ctypes.c_uint64(ptr))

    def allocating(self) -> contextlib.AbstractContextManager[None]:
        return torch.cuda.use_mem_pool(self.pool)
