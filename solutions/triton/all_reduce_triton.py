"""All-reduce (problem "all-reduce") in Triton: one-shot over symmetric memory.

Exists to show that Triton (its compiler, its C launcher build and its cache) works inside the
sandbox: copy x into this rank's symmetric buffer, barrier, one Triton kernel loads every rank's
buffer through its peer address and sums in fp32 in rank order, barrier.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

from evaluator.cuda import peer_pointers


@triton.jit
def _sum_peers(ptrs, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.static_range(WORLD):
        peer = tl.load(ptrs + r).to(tl.pointer_type(out.dtype.element_ty))
        acc += tl.load(peer + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


_buffers: dict = {}


def _state(x: torch.Tensor, group: dist.ProcessGroup):
    key = (x.numel(), x.dtype, x.device, group.group_name)
    if key not in _buffers:
        buf = symm_mem.empty(x.numel(), dtype=x.dtype, device=x.device)
        handle = symm_mem.rendezvous(buf, group.group_name)
        _buffers[key] = (buf, handle, peer_pointers(handle, x.device))
    return _buffers[key]


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    buf, handle, ptrs = _state(x, group)
    buf.copy_(x.reshape(-1))
    handle.barrier(channel=0)
    out = torch.empty_like(x)
    n = x.numel()
    block = 2048
    _sum_peers[(triton.cdiv(n, block),)](ptrs, out.reshape(-1), n, WORLD=dist.get_world_size(group), BLOCK=block)
    handle.barrier(channel=1)
    return out
