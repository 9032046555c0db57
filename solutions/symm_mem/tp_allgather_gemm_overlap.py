"""Tensor-parallel all-gather + GEMM (problem "tp-allgather-gemm"): the gather hides behind the
GEMMs, shard by shard.

out = all_gather(x_shard) @ weight_shard.T, rows in rank order. Per call:
- a side stream pushes this rank's shard into slot `rank` of each peer's symmetric buffer with
  the copy engines (cudaMemcpyAsync to the peer's address: no SM time), peers in rotated order
  (rank+1 first), and after each push raises a flag in that peer's signal pad;
- meanwhile the main stream multiplies the local shard straight into its rows of the output,
  then, for the sources in the order they push to this rank (rank-1 first), waits for the
  source's flag and multiplies its shard, read from the local symmetric buffer, into its rows.
With 2 ranks the push (64 MiB at ~385 GB/s, ~175 us on H200) hides under the local half of the
GEMM (~0.35 ms); with 4, each 32 MiB push lands while the GEMM before it runs. The unfused
reference pays the whole gather, then the GEMM.

Flags: slot world + s of rank r's pad is "rank s's shard has landed in r's buffer", set 0->1 by
s and taken 1->0 by r (compare-and-swap at system scope, fenced: the protocol of PyTorch's
symmetric-memory barrier; tiny kernels of our own, one thread each). A flag is never set twice
before it is taken, because setting spins until it reads 0.

Why the buffers are safe: the symmetric buffer alternates between two halves by call parity.
Peer p reads half q of its own buffer (its GEMMs) in call k; this rank writes there again in
call k+2, on a side stream that first waited for this rank's main stream, which in call k+1
waited for p's flag; p raised that flag from a side stream that had waited for p's main stream,
i.e. after p's GEMMs of call k. The side stream is joined back into the main stream before
returning, so the harness's end event covers it.

Modeled on PyTorch's async-TP all-gather matmul
(torch/distributed/_symmetric_memory/__init__.py, _pipelined_multi_all_gather_and_consume),
which pulls peers' shards with the copy engines step by step between barriers; this one pushes,
so no rank copies its own shard into its buffer first, and per-peer flags replace barriers.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from evaluator.cuda import compile_kernels

SOURCE = r"""
// pads[r] + slot: a flag on rank r. raise: wait until it reads 0, set it to 1 (after a fence,
// so everything this stream did before is visible first). take: wait until 1, set 0, fence.
extern "C" __global__ void raise_flag(unsigned int* const* pads, int peer, long long slot) {
  __threadfence_system();
  while (atomicCAS_system(pads[peer] + slot, 0u, 1u) != 0u) {}
}
extern "C" __global__ void take_flag(unsigned int* const* pads, int rank, long long slot) {
  while (atomicCAS_system(pads[rank] + slot, 1u, 0u) != 1u) {}
  __threadfence_system();
}
"""

_kernels: dict = {}
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
        self.pads = torch.tensor(list(self.handle.signal_pad_ptrs), dtype=torch.int64, device=device)
        if not _kernels:
            _kernels.update(compile_kernels(SOURCE, ["raise_flag", "take_flag"]))
        self.calls = 0
        # Channel 0 of the pads (slots 0..world-1) is the barrier's; the flags use slots
        # world..2*world-1. One barrier first: no peer raises a flag before every rank is set up.
        self.handle.barrier(channel=0)


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
            peer = (rank + step) % world
            state.remote[parity][peer].copy_(x)
            _kernels["raise_flag"](state.pads, peer, world + rank, grid=1, block=1)
    torch.mm(x, w_t, out=out[rank * rows:(rank + 1) * rows])
    for step in range(1, world):
        src = (rank - step) % world  # the peer whose step-th push comes here
        _kernels["take_flag"](state.pads, rank, world + src, grid=1, block=1)
        torch.mm(state.local[parity, src], w_t, out=out[src * rows:(src + 1) * rows])
    main.wait_stream(state.side)
    return out
