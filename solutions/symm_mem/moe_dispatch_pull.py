"""MoE token dispatch (problem "moe-dispatch-all-to-all"): every rank pulls the rows it receives
straight out of the token owners' symmetric buffers, permutation fused into the transfer.

Per call:
1. Each rank publishes x, topk_idx and topk_weights in its symmetric buffer (local copies; x is
   T x H, far smaller than the T x k rows the reference permutes and sends), then one barrier.
2. Each rank copies every peer's topk_idx and topk_weights (T x k each: kilobytes) and works out
   alone, with a few torch ops, which rows it receives: the (source rank s, token t, slot j)
   with topk_idx[s][t, j] among its experts, ordered by source rank, local expert, token: the
   reference's order (its argsort over expert * T + token, then an all-to-all in rank order).
   From these come recv_weights, tokens_per_expert and recv_src_index = s * T + t directly,
   with no count exchange and no all-to-all of weights or indices.
3. One kernel reads each distinct (source, token) row once, over NVLink for peers (locally for
   its own tokens), 16 bytes per load, and writes it into every received row that needs it (a
   token whose k experts put several on this rank is expanded here, not sent several times: the
   DeepEP dispatch's saving, which the problem's roofline assumes).
So each token crosses a link at most once per destination rank; the reference gathers one row
per (token, expert) into a send buffer (index_select), sends them all, and runs three more
all-to-alls. Both sync with the host for the output sizes.

Why it is right: the receive list is a pure function of all ranks' topk_idx, and the rows are
bytes copied unchanged, so every output is bit-identical to the reference's. Buffers alternate
between two halves by call parity: a rank writes half p again in call k+2, after the barrier of
call k+1, which every peer reaches only after its call k (its reads of half p) ended on its
stream.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from evaluator.cuda import compile_kernels, peer_pointers

SOURCE = r"""
// Group g is one distinct (source rank src[g], token token[g]); its row of the x published at
// bufs[src] + x_offset (rows of row_bytes) is read once and written to the output rows
// dest[first[g] .. first[g + 1]). nvec = row_bytes / 16 when row_bytes is a multiple of 16
// (else 0: bytes only).
extern "C" __global__ void __launch_bounds__(512) gather_rows(
    const long long* __restrict__ bufs, long long x_offset, const long long* __restrict__ src,
    const long long* __restrict__ token, const long long* __restrict__ first,
    const long long* __restrict__ dest, unsigned char* __restrict__ out, long long groups,
    long long row_bytes, long long nvec) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (nvec > 0) {
    for (long long i = tid; i < groups * nvec; i += stride) {
      const long long g = i / nvec, v = i - g * nvec;
      const unsigned char* row = (const unsigned char*)bufs[src[g]] + x_offset + token[g] * row_bytes;
      const uint4 value = __ldcg(reinterpret_cast<const uint4*>(row) + v);
      for (long long j = first[g]; j < first[g + 1]; ++j)
        reinterpret_cast<uint4*>(out + dest[j] * row_bytes)[v] = value;
    }
  } else {
    for (long long i = tid; i < groups * row_bytes; i += stride) {
      const long long g = i / row_bytes, b = i - g * row_bytes;
      const unsigned char value =
          __ldcg((const unsigned char*)bufs[src[g]] + x_offset + token[g] * row_bytes + b);
      for (long long j = first[g]; j < first[g + 1]; ++j) out[dest[j] * row_bytes + b] = value;
    }
  }
}
"""

THREADS = 512
_kernels: dict = {}
_states: dict = {}


def _align(n: int) -> int:
    return -(-n // 256) * 256


class _State:
    """The symmetric buffer: per half, [x (T x H) | topk_idx (T x k int64) | weights (T x k f32)]."""

    def __init__(self, x: torch.Tensor, k: int, group: dist.ProcessGroup):
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        tokens, hidden = x.shape
        self.x_bytes = tokens * hidden * x.element_size()
        self.idx_off = _align(self.x_bytes)
        self.w_off = self.idx_off + _align(tokens * k * 8)
        self.half = _align(self.w_off + tokens * k * 4)
        self.buf = symm_mem.empty(2 * self.half, dtype=torch.uint8, device=x.device)
        self.handle = symm_mem.rendezvous(self.buf, group.group_name)
        self.bufs = peer_pointers(self.handle, x.device)
        self.shape = (tokens, hidden, k)
        self.views = [[self._views(peer, p, x.dtype) for peer in range(self.world)] for p in range(2)]
        self.sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        if not _kernels:
            _kernels.update(compile_kernels(SOURCE, ["gather_rows"]))
        self.calls = 0

    def _views(self, peer: int, parity: int, dtype: torch.dtype):
        tokens, hidden, k = self.shape
        base = parity * self.half
        get = self.handle.get_buffer
        itemsize = torch.empty((), dtype=dtype).element_size()
        return (get(peer, (tokens, hidden), dtype, base // itemsize),
                get(peer, (tokens, k), torch.int64, (base + self.idx_off) // 8),
                get(peer, (tokens, k), torch.float32, (base + self.w_off) // 4))


def receive_plan(all_idx: torch.Tensor, rank: int, local_experts: int):
    """The rows rank `rank` receives, in the reference's order, from everyone's topk_idx
    [world, T, k]: (source rank, token, slot, local expert) per row."""
    tokens = all_idx.shape[1]
    local = all_idx - rank * local_experts
    src, tok, slot = ((local >= 0) & (local < local_experts)).nonzero(as_tuple=True)
    expert = local[src, tok, slot]
    order = torch.argsort((src * local_experts + expert) * tokens + tok)  # unique keys
    return src[order], tok[order], slot[order], expert[order]


def row_groups(src: torch.Tensor, tok: torch.Tensor, tokens: int):
    """The distinct (source, token) pairs among the received rows, as CSR: (source, token) per
    group, first[g]..first[g+1] indexing dest, the output rows that group fills."""
    key = src * tokens + tok
    dest = torch.argsort(key, stable=True)
    unique, counts = torch.unique_consecutive(key[dest], return_counts=True)
    first = torch.zeros(unique.numel() + 1, dtype=torch.int64, device=src.device)
    torch.cumsum(counts, 0, out=first[1:])
    return unique // tokens, unique % tokens, first, dest


def solution(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
             num_experts: int, *, group: dist.ProcessGroup):
    k = topk_idx.shape[1]
    key = (tuple(x.shape), k, x.dtype, x.device, group.group_name)
    state = _states.get(key)
    if state is None:
        state = _states[key] = _State(x, k, group)
    world, rank = state.world, state.rank
    tokens, hidden = x.shape
    parity = state.calls & 1
    state.calls += 1
    x_mine, idx_mine, w_mine = state.views[parity][rank]
    x_mine.copy_(x)
    idx_mine.copy_(topk_idx)
    w_mine.copy_(topk_weights)
    state.handle.barrier(channel=0)
    all_idx = torch.empty((world, tokens, k), dtype=torch.int64, device=x.device)
    all_w = torch.empty((world, tokens, k), dtype=torch.float32, device=x.device)
    for peer in range(world):
        _, idx_v, w_v = state.views[parity][peer]
        all_idx[peer].copy_(idx_v)
        all_w[peer].copy_(w_v)
    local_experts = num_experts // world
    src, tok, slot, expert = receive_plan(all_idx, rank, local_experts)
    rows = src.numel()
    recv_x = torch.empty((rows, hidden), dtype=x.dtype, device=x.device)
    if rows:
        g_src, g_tok, first, dest = row_groups(src, tok, tokens)
        groups = g_src.numel()
        row_bytes = hidden * x.element_size()
        nvec = row_bytes // 16 if row_bytes % 16 == 0 else 0
        work = groups * (nvec or row_bytes)
        grid = max(1, min(-(-work // THREADS), 4 * state.sms))
        _kernels["gather_rows"](state.bufs, parity * state.half, g_src, g_tok, first, dest, recv_x,
                                groups, row_bytes, nvec, grid=grid, block=THREADS)
    recv_w = all_w[src, tok, slot]
    tokens_per_expert = torch.bincount(expert, minlength=local_experts).to(torch.int64)
    recv_src = src * tokens + tok
    return recv_x, recv_w, tokens_per_expert, recv_src
