"""Deterministic building blocks that GPU references need where the obvious op is not.

``index_add_`` on a GPU adds duplicate indices with atomics, so the float sum depends on thread
timing; a reference must give the same bits every run (problems/README.md).
"""

from __future__ import annotations

import torch

FIXED_POINT = 2.0 ** 32


def scatter_add_fixed_point(values: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """Rows of ``values`` summed into ``size`` rows by ``index``, identical in any order.

    Accumulates in 64-bit fixed point (as GPU MD codes such as AMBER's SPFP do), where integer
    addition is associative, so any accumulation order gives the same bits. Resolution 2^-32, far
    below any float tolerance; magnitudes must stay below 2^31.
    """
    q = torch.round(values.double() * FIXED_POINT).to(torch.int64)
    acc = torch.zeros((size,) + values.shape[1:], dtype=torch.int64, device=values.device)
    acc.index_add_(0, index, q)
    return (acc.double() / FIXED_POINT).to(values.dtype)
