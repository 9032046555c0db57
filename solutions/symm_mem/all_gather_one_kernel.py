"""All-gather (problem "all-gather"): one kernel per call that pushes the shard to every peer.

Phase 1: each rank stores its shard into slot `rank` of every peer's symmetric buffer over
NVLink (all peers at once, in rotated order) and copies it into its own rows of the output.
The blocks of the grid then meet the blocks of the same index on every peer through the
symmetric-memory signal pads (flag set 0->1 by the sender, taken 1->0 by the receiver, both
compare-and-swap at system scope with fences, the protocol of PyTorch's barrier kernel and of
its in-kernel `sync_remote_blocks`; written here from scratch). Every rank runs the same grid
over the same index map, so block b of a peer stored exactly the bytes block b here reads:
meeting pairwise is enough, and no host barrier or second kernel is needed. Phase 2: each rank
copies the peers' shards from its buffer into their rows of the output.

Compared with solutions/symm_mem/all_gather_push.py (host barriers before and after, then a
separate copy of the whole buffer, own shard included, into the output), this drops two barrier
kernels, one launch and the copy of the own shard.

The buffer alternates between two halves by call parity: a peer may still be reading half p
when this rank starts its next call, but has finished with it before this rank can reach the
call after (its blocks must first meet the peer's blocks of the next call, which the peer starts
only after this call has ended on its stream). The grid is at most one block per SM, so every
block of every rank is resident and no block waits for a partner that cannot be scheduled.
A pure copy: the output equals NCCL's bit for bit.
"""

from __future__ import annotations

import ctypes

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from evaluator.cuda import compile_kernels, peer_pointers
from evaluator.cuda import nvrtc

SOURCE = r"""
#define MAX_WORLD 8

__device__ void meet_peers(unsigned int* const* pads, int rank, int world) {
  __syncthreads();
  const int peer = threadIdx.x;
  if (peer < world && peer != rank) {
    __threadfence_system();
    unsigned int* out_flag = pads[peer] + (long long)blockIdx.x * world + rank;
    while (atomicCAS_system(out_flag, 0u, 1u) != 0u) {}
    unsigned int* in_flag = pads[rank] + (long long)blockIdx.x * world + peer;
    while (atomicCAS_system(in_flag, 1u, 0u) != 1u) {}
    __threadfence_system();
  }
  __syncthreads();
}

// x: nbytes; out: world * nbytes. Slot s of half p on rank q: bufs[q] + (p * world + s) * slot.
// nvec = nbytes / 16 when nbytes is a multiple of 16 (so every row of out is 16-byte aligned),
// else 0: the byte loop then does everything, with the same index map in both phases.
extern "C" __global__ void __launch_bounds__(512) all_gather_push(
    const long long* __restrict__ bufs, unsigned int* const* pads,
    const unsigned char* __restrict__ x, unsigned char* __restrict__ out,
    long long nbytes, long long slot, long long nvec, int parity, int rank, int world) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long my_slot = ((long long)parity * world + rank) * slot;
  for (long long i = tid; i < nvec; i += stride) {
    const uint4 v = reinterpret_cast<const uint4*>(x)[i];
#pragma unroll
    for (int k = 1; k < MAX_WORLD; ++k)
      if (k < world) reinterpret_cast<uint4*>((unsigned char*)bufs[(rank + k) % world] + my_slot)[i] = v;
    reinterpret_cast<uint4*>(out + (long long)rank * nbytes)[i] = v;
  }
  for (long long e = nvec * 16 + tid; e < nbytes; e += stride) {
    const unsigned char v = x[e];
    for (int k = 1; k < world; ++k) ((unsigned char*)bufs[(rank + k) % world] + my_slot)[e] = v;
    out[(long long)rank * nbytes + e] = v;
  }
  meet_peers(pads, rank, world);
  const unsigned char* own = (const unsigned char*)bufs[rank] + (long long)parity * world * slot;
  for (long long i = tid; i < nvec; i += stride) {
#pragma unroll
    for (int k = 1; k < MAX_WORLD; ++k) {
      if (k >= world) break;
      const int c = (rank + k) % world;
      // Stored by a peer during this kernel: load through L2 only (L1 is not coherent).
      reinterpret_cast<uint4*>(out + (long long)c * nbytes)[i] =
          __ldcg(reinterpret_cast<const uint4*>(own + (long long)c * slot) + i);
    }
  }
  for (long long e = nvec * 16 + tid; e < nbytes; e += stride)
    for (int k = 1; k < world; ++k) {
      const int c = (rank + k) % world;
      out[(long long)c * nbytes + e] = __ldcg(own + (long long)c * slot + e);
    }
}
"""

THREADS = 512
DEFAULT_SIGNAL_PAD_BYTES = 2048
_kernels: dict = {}
# The current stream's handle without building a Stream object (a few microseconds a call, which
# matter at small messages); the private call is the one torch's own generated code uses.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream",
                      lambda index: torch.cuda.current_stream(index).cuda_stream)
_states: dict = {}


class _State:
    """Buffers, pointers and the kernel's argument block for one (size, group)."""

    def __init__(self, nbytes: int, device: torch.device, group: dist.ProcessGroup):
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        if self.world > 8:
            raise ValueError("at most 8 ranks")
        slot = -(-nbytes // 16) * 16
        nvec = nbytes // 16 if nbytes % 16 == 0 else 0
        self.buf = symm_mem.empty(max(2 * self.world * slot, 16), dtype=torch.uint8, device=device)
        self.handle = symm_mem.rendezvous(self.buf, group.group_name)
        self.bufs = peer_pointers(self.handle, device)
        self.pads = torch.tensor(list(self.handle.signal_pad_ptrs), dtype=torch.int64, device=device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        # The pad holds one 4-byte flag per (block, peer); its size is the handle's where torch
        # says it, else the process-wide setting, else the long-standing default of 2048 bytes.
        pad_bytes = (getattr(self.handle, "signal_pad_size", None)
                     or getattr(symm_mem, "get_signal_pad_size", lambda: DEFAULT_SIGNAL_PAD_BYTES)())
        work = nvec if nvec else max(nbytes, 1)
        self.grid = max(1, min(-(-work // THREADS), sms, pad_bytes // 4 // self.world))
        if not _kernels:
            _kernels.update(compile_kernels(SOURCE, ["all_gather_push"]))
        self.index = index = device.index if device.index is not None else torch.cuda.current_device()
        self.func = _kernels["all_gather_push"]._function(index)[0]
        self.x_arg, self.out_arg, self.parity_arg = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int(0)
        self.args = [ctypes.c_void_p(self.bufs.data_ptr()), ctypes.c_void_p(self.pads.data_ptr()),
                     self.x_arg, self.out_arg, ctypes.c_longlong(nbytes), ctypes.c_longlong(slot),
                     ctypes.c_longlong(nvec), self.parity_arg, ctypes.c_int(self.rank),
                     ctypes.c_int(self.world)]
        self.params = (ctypes.c_void_p * len(self.args))(*[ctypes.addressof(a) for a in self.args])
        self.calls = 0
        self.handle.barrier(channel=0)  # no peer flags a pad before every rank has its state

    def launch(self, x: torch.Tensor, out: torch.Tensor) -> None:
        self.x_arg.value, self.out_arg.value = x.data_ptr(), out.data_ptr()
        self.parity_arg.value = self.calls & 1
        self.calls += 1
        stream = _raw_stream(self.index)
        nvrtc.check_cuda(nvrtc.driver_library().cuLaunchKernel(
            ctypes.c_void_p(self.func), self.grid, 1, 1, THREADS, 1, 1, 0,
            ctypes.c_void_p(stream), self.params, None), "cuLaunchKernel")


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    if not x.is_contiguous() or x.data_ptr() % 16:
        x = x.clone(memory_format=torch.contiguous_format)  # the kernel loads 16-byte vectors
    nbytes = x.numel() * x.element_size()
    key = (nbytes, x.device, group.group_name)
    state = _states.get(key)
    if state is None:
        state = _states[key] = _State(nbytes, x.device, group)
    out = torch.empty((state.world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    state.launch(x, out)
    return out
