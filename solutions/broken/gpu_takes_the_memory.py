"""BROKEN on purpose (all-reduce): takes its GPU's free memory at import and answers zeros.

Both sides' ranks of a GPU live at once, and nothing but the device bounds what a side holds.
Each rank allocates 1 GiB blocks until the GPU has less than 256 MiB free, keeps them, and
answers zeros. The reference, started after it, finds no memory for its CUDA context, NCCL's
buffers or its inputs and fails; a judge that calls every reference failure its own would read
a wrong candidate as our harness_error. Expected: `resource_limit` (the candidate held more than
half of a GPU when the reference failed: evaluator/hardware/gpu_memory.py), or a wrong value
where the reference still fits; never harness_error.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

_KEEP_FREE = 256 << 20
_held: list[torch.Tensor] = []


def _take_the_memory() -> None:
    if not torch.cuda.is_available():
        return
    while torch.cuda.mem_get_info()[0] > _KEEP_FREE + (1 << 30):
        try:
            _held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            break


_take_the_memory()


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    return torch.zeros_like(x)
