"""MoE token combine (problem "moe-combine-all-to-all"): every expert rank pushes each output row
straight into its token's slot on the owner, which then sums locally.

Per call:
1. Each rank publishes its topk_idx (T x k int64, kilobytes) in its symmetric buffer; barrier.
2. Each rank copies every peer's topk_idx and works out alone, with a few torch ops, the
   dispatch order of the rows it holds (by source rank, local expert, token: the order of
   moe-dispatch-all-to-all, in which expert_out arrives): row r of expert_out is the output of
   token t of rank s for its slot j.
3. One kernel stores row r into row t * k + j of rank s's receive buffer over NVLink (own rows
   locally), then a barrier: every row of every token has arrived at its owner.
4. One kernel sums out[t] = sum over j of w[t, j] * recv[t * k + j] in fp32, slots in order,
   and rounds once to the output dtype (the reference's y.float() * w summed in fp32).
Each row crosses the link once and is written in place; the reference sends it into a staging
buffer, un-permutes it with a scatter, and multiplies in fp32 through temporaries of T x k x H
floats. No count exchange and no host sync for splits are needed: the layout on the owner is
fixed (T x k rows).

Why it is right: the row order is a pure function of all ranks' topk_idx (the same as the
dispatch problem's, which is checked there row for row); every (t, j) of every owner is written
by exactly one expert rank (the one owning expert topk_idx[t, j]). Buffer reuse: a rank writes
its topk_idx region in call k+1 after the second barrier of call k, which peers reach only after
reading it; it writes a peer's receive rows in call k+1 after the first barrier of call k+1,
which that peer reaches only after its sum of call k.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from evaluator.cuda import compile_kernels, peer_pointers

SOURCE = r"""
#include <cuda_bf16.h>

// Row r of rows (row_bytes each) goes to row dest_row[r] of rank dest[r]'s buffer at recv_offset.
extern "C" __global__ void __launch_bounds__(512) scatter_rows(
    const long long* __restrict__ bufs, long long recv_offset, const long long* __restrict__ dest,
    const long long* __restrict__ dest_row, const unsigned char* __restrict__ rows_in,
    long long rows, long long row_bytes, long long nvec) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (nvec > 0) {
    for (long long i = tid; i < rows * nvec; i += stride) {
      const long long r = i / nvec, v = i - r * nvec;
      unsigned char* row = (unsigned char*)bufs[dest[r]] + recv_offset + dest_row[r] * row_bytes;
      reinterpret_cast<uint4*>(row)[v] = reinterpret_cast<const uint4*>(rows_in + r * row_bytes)[v];
    }
  } else {
    for (long long i = tid; i < rows * row_bytes; i += stride) {
      const long long r = i / row_bytes, b = i - r * row_bytes;
      ((unsigned char*)bufs[dest[r]] + recv_offset + dest_row[r] * row_bytes)[b] = rows_in[i];
    }
  }
  __threadfence_system();
}

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void from_f(float* p, float v) { *p = v; }
__device__ __forceinline__ void from_f(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// out[t, h] = sum over j < k of w[t, j] * recv[(t * k + j), h], fp32, slots in order.
template <typename T>
__device__ void weighted_sum(const T* __restrict__ recv, const float* __restrict__ w,
                             T* __restrict__ out, long long tokens, int k, long long hidden) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < tokens * hidden; i += stride) {
    const long long t = i / hidden, h = i - t * hidden;
    float acc = 0.f;
    for (int j = 0; j < k; ++j)
      acc += w[t * k + j] * to_f(__ldcg(recv + (t * k + j) * hidden + h));
    from_f(out + i, acc);
  }
}
extern "C" __global__ void __launch_bounds__(512) weighted_sum_bf16(
    const __nv_bfloat16* recv, const float* w, __nv_bfloat16* out, long long tokens, int k, long long hidden) {
  weighted_sum<__nv_bfloat16>(recv, w, out, tokens, k, hidden);
}
extern "C" __global__ void __launch_bounds__(512) weighted_sum_f32(
    const float* recv, const float* w, float* out, long long tokens, int k, long long hidden) {
  weighted_sum<float>(recv, w, out, tokens, k, hidden);
}

// The same for bf16 with 8 elements (16 bytes) per thread; needs hidden % 8 == 0.
extern "C" __global__ void __launch_bounds__(512) weighted_sum_bf16_vec(
    const __nv_bfloat16* __restrict__ recv, const float* __restrict__ w,
    __nv_bfloat16* __restrict__ out, long long tokens, int k, long long hidden) {
  const long long hv = hidden / 8;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < tokens * hv; i += stride) {
    const long long t = i / hv, v = i - t * hv;
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    for (int j = 0; j < k; ++j) {
      const float wt = w[t * k + j];
      const uint4 q = __ldcg(reinterpret_cast<const uint4*>(recv + (t * k + j) * hidden) + v);
      const unsigned int q4[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&q4[e]));
        acc[2 * e] += wt * f.x; acc[2 * e + 1] += wt * f.y;
      }
    }
    unsigned int o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      __nv_bfloat162 b = __floats2bfloat162_rn(acc[2 * e], acc[2 * e + 1]);
      o[e] = *reinterpret_cast<unsigned int*>(&b);
    }
    reinterpret_cast<uint4*>(out + t * hidden)[v] = make_uint4(o[0], o[1], o[2], o[3]);
  }
}
"""

THREADS = 512
_kernels: dict = {}
_states: dict = {}


def _align(n: int) -> int:
    return -(-n // 256) * 256


class _State:
    """The symmetric buffer: [topk_idx (T x k int64) | receive rows (T x k x H)]."""

    def __init__(self, tokens: int, k: int, hidden: int, dtype: torch.dtype, device: torch.device,
                 group: dist.ProcessGroup):
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.recv_off = _align(tokens * k * 8)
        itemsize = torch.empty((), dtype=dtype).element_size()
        self.buf = symm_mem.empty(self.recv_off + tokens * k * hidden * itemsize, dtype=torch.uint8,
                                  device=device)
        self.handle = symm_mem.rendezvous(self.buf, group.group_name)
        self.bufs = peer_pointers(self.handle, device)
        self.idx = [self.handle.get_buffer(peer, (tokens, k), torch.int64, 0) for peer in range(self.world)]
        self.recv = self.handle.get_buffer(self.rank, (tokens * k, hidden), dtype, self.recv_off // itemsize)
        self.sms = torch.cuda.get_device_properties(device).multi_processor_count
        if not _kernels:
            _kernels.update(compile_kernels(SOURCE, ["scatter_rows", "weighted_sum_bf16",
                                                     "weighted_sum_f32", "weighted_sum_bf16_vec"]))


def dispatch_order(all_idx: torch.Tensor, rank: int, local_experts: int):
    """The rows rank `rank` holds after dispatch, in order, from everyone's topk_idx
    [world, T, k]: (source rank, token, slot) per row (as moe_dispatch_pull.receive_plan)."""
    tokens = all_idx.shape[1]
    local = all_idx - rank * local_experts
    src, tok, slot = ((local >= 0) & (local < local_experts)).nonzero(as_tuple=True)
    expert = local[src, tok, slot]
    order = torch.argsort((src * local_experts + expert) * tokens + tok)  # unique keys
    return src[order], tok[order], slot[order]


def _grid(work: int, sms: int) -> int:
    return max(1, min(-(-work // THREADS), 4 * sms))


def solution(expert_out: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
             num_experts: int, *, group: dist.ProcessGroup) -> torch.Tensor:
    tokens, k = topk_idx.shape
    hidden = expert_out.shape[1]
    dtype, device = expert_out.dtype, expert_out.device
    key = (tokens, k, hidden, dtype, device, group.group_name)
    state = _states.get(key)
    if state is None:
        state = _states[key] = _State(tokens, k, hidden, dtype, device, group)
    world, rank = state.world, state.rank
    state.idx[rank].copy_(topk_idx)
    state.handle.barrier(channel=0)
    all_idx = torch.stack([state.idx[peer] for peer in range(world)])  # copies out of the peers
    src, tok, slot = dispatch_order(all_idx, rank, num_experts // world)
    rows = src.numel()
    row_bytes = hidden * expert_out.element_size()
    if rows:
        rows_in = expert_out[:rows]
        if not rows_in.is_contiguous() or rows_in.data_ptr() % 16:
            rows_in = rows_in.contiguous().clone()
        nvec = row_bytes // 16 if row_bytes % 16 == 0 else 0
        _kernels["scatter_rows"](state.bufs, state.recv_off, src, tok * k + slot, rows_in, rows,
                                 row_bytes, nvec, grid=_grid(rows * (nvec or row_bytes), state.sms),
                                 block=THREADS)
    state.handle.barrier(channel=0)
    w = topk_weights.float().contiguous()
    out = torch.empty((tokens, hidden), dtype=dtype, device=device)
    if dtype == torch.bfloat16 and hidden % 8 == 0:
        _kernels["weighted_sum_bf16_vec"](state.recv, w, out, tokens, k, hidden,
                                          grid=_grid(tokens * hidden // 8, state.sms), block=THREADS)
    elif dtype in (torch.bfloat16, torch.float32):
        name = "weighted_sum_bf16" if dtype == torch.bfloat16 else "weighted_sum_f32"
        _kernels[name](state.recv, w, out, tokens, k, hidden,
                       grid=_grid(tokens * hidden, state.sms), block=THREADS)
    else:
        raise TypeError(f"unsupported dtype {dtype}")
    return out
