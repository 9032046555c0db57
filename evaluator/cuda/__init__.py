"""Build helpers for candidate solutions: NVRTC kernels and JIT extensions, built once per
evaluation (not once per rank) in a cache shared by the ranks. See README.md beside this file.
"""

from __future__ import annotations

from typing import Any

import torch

from .cache import compile_seconds, compile_stats, reset_stats
from .errors import CompileError
from .extension import load_extension
from .kernels import Kernel, compile_kernels


def peer_pointers(handle: Any, device: torch.device | str | None = None) -> torch.Tensor:
    """The peers' symmetric-buffer addresses as an int64 CUDA tensor, indexed by rank.

    ``handle`` is what ``torch.distributed._symmetric_memory.rendezvous`` returned. Pass the
    tensor to a kernel as ``const long long*`` (or ``T* const*``) and cast each entry.
    Build it once per handle, not once per call.
    """
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return torch.tensor(list(handle.buffer_ptrs), dtype=torch.int64, device=device)


__all__ = [
    "CompileError", "Kernel", "compile_kernels", "compile_seconds", "compile_stats",
    "load_extension", "peer_pointers", "reset_stats",
]
