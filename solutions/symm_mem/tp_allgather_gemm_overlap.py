"""Tensor-parallel all-gather + GEMM (problem "tp-allgather-gemm"): the gather hides behind the
local shard's GEMM.

out = all_gather(x_shard) @ weight_shard.T, rows in rank order. Per call:
- a side stream pushes this rank's shard into slot `rank` of every peer's symmetric buffer with
  the copy engines (cudaMemcpyAsync to the peer's address; no SM time), then meets the peers in
  a barrier (after it, every peer's shard has landed here);
- meanwhile the main stream multiplies the local shard straight into its rows of the output;
- the main stream waits for the side stream and multiplies each peer's shard, read from the
  local symmetric buffer, into that peer's rows.
With 2 ranks the push (64 MiB at ~385 GB/s, ~175 us on H200) hides under the local half of the
GEMM (~0.35 ms); with 4 the three pushes (3 x 32 MiB) run one after the other on the side
stream and still fit under the local quarter. The unfused reference pays gather + GEMM.

Why the buffers are safe: the symmetric buffer alternates between two halves by call parity. A
peer reads half p of this rank (its GEMMs) in call k; this rank writes half p again in call
k+2, after its barrier of call k+1, which that peer reaches only after its side stream waited
for its main stream, i.e. after its GEMMs of call k. The side stream's work is joined back into
the main stream before returning, so the harness's end event covers it.

Modeled on PyTorch's async-TP all-gather matmul
(torch/distributed/_symmetric_memory/__init__.py, _pipelined_multi_all_gather_and_consume),
which pulls peers' shards with the copy engines step by step; this one pushes, so no rank copies
its own shard into its buffer first, and a single barrier per call suffices.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

_states: dict = {}


class _State:
    def __init__(self, rows: int, hidden: int, dtype: torch.dtype, device: torch.device,
                 group: dist.ProcessGroup):
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.rows = rows
        slot = rows * hidden
        self.buf = symm_mem.empty(2 * self.world * slot, dtype=dtype, device=device)
        self.handle = symm_mem.rendezvous(self.buf, group.group_name)
        self.local = self.buf.view(2, self.world, rows, hidden)
        # remote[p][peer]: slot `rank` of half p on that peer, where this rank's shard goes.
        self.remote = [{peer: self.handle.get_buffer(peer, (rows, hidden), dtype,
                                                     (p * self.world + self.rank) * slot)
                        for peer in range(self.world) if peer != self.rank} for p in range(2)]
        self.side = torch.cuda.Stream(device)
        self.calls = 0


def solution(x_shard: torch.Tensor, weight_shard: torch.Tensor, *,
             group: dist.ProcessGroup) -> torch.Tensor:
    rows, hidden = x_shard.shape
    key = (rows, hidden, x_shard.dtype, x_shard.device, group.group_name)
    state = _states.get(key)
    if state is None:
        state = _states[key] = _State(rows, hidden, x_shard.dtype, x_shard.device, group)
    world, rank = state.world, state.rank
    parity = state.calls & 1
    state.calls += 1
    x = x_shard.contiguous()
    w_t = weight_shard.t()
    out = torch.empty((world * rows, weight_shard.shape[0]), dtype=x.dtype, device=x.device)
    main = torch.cuda.current_stream()
    state.side.wait_stream(main)  # x is ready, and the previous call's GEMMs are done
    with torch.cuda.stream(state.side):
        for step in range(1, world):
            state.remote[parity][(rank + step) % world].copy_(x)
        state.handle.barrier(channel=0)
    torch.mm(x, w_t, out=out[rank * rows:(rank + 1) * rows])
    main.wait_stream(state.side)
    for step in range(1, world):
        src = (rank - step) % world
        torch.mm(state.local[parity, src], w_t, out=out[src * rows:(src + 1) * rows])
    return out
