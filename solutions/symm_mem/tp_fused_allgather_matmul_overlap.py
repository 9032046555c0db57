"""Async-TP all-gather + matmuls along the sequence (problem "tp-fused-allgather-matmul"), by
hand: the gather hides behind the GEMMs, shard by shard, with no transposes.

a_shard is [batch, seq/tp, hidden], gathered along the sequence (dim 1) into a_full
[batch, seq, hidden]; the outputs are a_full, a_full @ b_gate and a_full @ b_up. Rank s's shard
is the sequence block s of every batch, so each output is written block by block in place:
a_full[:, block s] and out[:, block s] = shard_s[b] @ B for each batch b (row blocks of a batch
are contiguous, so every GEMM writes its rows of the output directly; the reference gathers
sequence-first and then transposes twice). Per call:
- a side stream pushes this rank's shard into slot `rank` of each peer's symmetric buffer with
  the copy engines (cudaMemcpyAsync to the peer's address: no SM time), peers in rotated order
  (rank+1 first), and after each push raises a flag in that peer's signal pad;
- meanwhile the main stream writes the local shard's blocks (its part of a_full, its GEMMs),
  then, for the sources in the order they push here (rank-1 first), waits for the source's flag
  and does the same from the shard in the local symmetric buffer.

Flags: slot world + s of rank r's pad means "rank s's shard has landed in r's buffer", set 0->1
by s and taken 1->0 by r (compare-and-swap at system scope, fenced, the protocol of PyTorch's
symmetric-memory barrier; one-thread kernels of our own). Setting spins until the flag reads 0,
so a flag is never set twice before it is taken.

Why the buffers are safe: the symmetric buffer alternates between two halves by call parity.
Peer p reads half q of its buffer in call k; this rank writes there again in call k+2, on a side
stream that first waited for this rank's main stream, which in call k+1 waited for p's flag; p
raised that flag from a side stream that had waited for p's main stream, i.e. after p's reads of
call k. The side stream is joined back into the main stream before returning.

Modeled on PyTorch's _fused_all_gather_matmul / _pipelined_multi_all_gather_and_consume
(torch/distributed/_symmetric_memory/__init__.py), which pulls shards step by step between
barriers on two streams; this one pushes, with a flag per peer instead of barriers.
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
    def __init__(self, shape: tuple[int, int, int], dtype: torch.dtype, device: torch.device,
                 group: dist.ProcessGroup):
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        slot = shape[0] * shape[1] * shape[2]
        self.buf = symm_mem.empty(2 * self.world * slot, dtype=dtype, device=device)
        self.handle = symm_mem.rendezvous(self.buf, group.group_name)
        self.local = self.buf.view(2, self.world, *shape)
        # remote[p][peer]: slot `rank` of half p on that peer, where this rank's shard goes.
        self.remote = [{peer: self.handle.get_buffer(peer, shape, dtype, (p * self.world + self.rank) * slot)
                        for peer in range(self.world) if peer != self.rank} for p in range(2)]
        self.side = torch.cuda.Stream(device)
        self.pads = torch.tensor(list(self.handle.signal_pad_ptrs), dtype=torch.int64, device=device)
        if not _kernels:
            _kernels.update(compile_kernels(SOURCE, ["raise_flag", "take_flag"]))
        self.calls = 0
        # Slots 0..world-1 are the barrier's channel 0; the flags use world..2*world-1. One
        # barrier first: no peer raises a flag before every rank is set up.
        self.handle.barrier(channel=0)


def _consume(shard: torch.Tensor, block: slice, a_full: torch.Tensor,
             weights: tuple[torch.Tensor, ...], outs: tuple[torch.Tensor, ...]) -> None:
    """Write one source's sequence block: its part of a_full and of every product."""
    a_full[:, block].copy_(shard)
    for w, out in zip(weights, outs):
        for b in range(shard.shape[0]):
            torch.mm(shard[b], w, out=out[b, block])


def solution(a_shard: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *,
             group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch, rows, hidden = a_shard.shape
    key = (batch, rows, hidden, a_shard.dtype, a_shard.device, group.group_name)
    state = _states.get(key)
    if state is None:
        state = _states[key] = _State((batch, rows, hidden), a_shard.dtype, a_shard.device, group)
    world, rank = state.world, state.rank
    parity = state.calls & 1
    state.calls += 1
    a = a_shard.contiguous()
    dtype, device = a.dtype, a.device
    a_full = torch.empty((batch, world * rows, hidden), dtype=dtype, device=device)
    gate = torch.empty((batch, world * rows, b_gate.shape[1]), dtype=dtype, device=device)
    up = torch.empty((batch, world * rows, b_up.shape[1]), dtype=dtype, device=device)
    weights, outs = (b_gate, b_up), (gate, up)
    main = torch.cuda.current_stream()
    state.side.wait_stream(main)  # a is ready, and the previous call's reads are done
    with torch.cuda.stream(state.side):
        for step in range(1, world):
            peer = (rank + step) % world
            state.remote[parity][peer].copy_(a)
            _kernels["raise_flag"](state.pads, peer, world + rank, grid=1, block=1)
    _consume(a, slice(rank * rows, (rank + 1) * rows), a_full, weights, outs)
    for step in range(1, world):
        src = (rank - step) % world  # the peer whose step-th push comes here
        _kernels["take_flag"](state.pads, rank, world + src, grid=1, block=1)
        _consume(state.local[parity, src], slice(src * rows, (src + 1) * rows), a_full, weights, outs)
    main.wait_stream(state.side)
    return a_full, gate, up
