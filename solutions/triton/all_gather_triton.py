"""All-gather (problem "all-gather") in Triton: one kernel per call that pushes the shard to every
peer. The protocol of solutions/symm_mem/all_gather_one_kernel.py, written in Triton.

NOT YET RUN ON A GPU: written on a machine without one, where only the compiler could check it
(scripts/triton_compile_check.py: it compiles for sm_90 with Triton 3.4, 3.5 and 3.6, one
release and one acquire system-scope CAS per peer issued by one thread, 16-byte loads and
stores when the shard is a multiple of 16 elements, at most 87 registers a thread). The first
device run must show that it passes (`MODE=check` in scripts/device/kernels_batch.sh) before
any timing counts.

Phase 1: program p loads tiles p, p + G, p + 2G, ... (G programs, BLOCK elements a tile) of the
shard, stores each into slot `rank` of every peer's symmetric buffer over NVLink (peers in
rotated order, addresses loaded from the device array of buffer pointers and cast with
`.to(tl.pointer_type(...))`) and into this rank's own rows of the output.

Meeting: program p then meets program p of every peer through the symmetric-memory signal pads,
one 4-byte flag per (program, sender) at pads[q][p * world + sender]. A `tl.debug_barrier()`
(bar.sync) puts every thread's stores of the program before thread 0's flag; for each peer in
turn the flag is set 0 -> 1 with `tl.atomic_cas(sem="release", scope="sys")`, spinning while
the peer has not yet taken the previous call's flag; then for each peer the incoming flag is
taken 1 -> 0 with `tl.atomic_cas(sem="acquire", scope="sys")`, spinning until it arrives, and a
second bar.sync orders every thread's loads after thread 0's acquire. A flag left at 0 by every
meeting means no reset is needed between calls, and the mailbox is the same one-slot protocol
as PyTorch's barrier kernel (handle.barrier(), used once at set-up, shares program 0's slots).
All sends come before all waits, so no cycle of waits can form: a send waits only for the
previous call's flag to be taken, which the previous call's kernel on the peer does.

Phase 2: program p copies the same tiles of every peer's slot in this rank's buffer into the
peers' rows of the output, as one [peers, BLOCK] tile so that all the loads are in flight
together (loaded with cache_modifier=".cg": stored by a peer during this kernel, so read
through L2 and never from a stale L1 line). Every rank runs the same grid over the same index
map, so program p of a peer stored exactly the tiles program p here reads: meeting pairwise is
enough, and no host barrier or second kernel is needed. A pure copy: bit for bit NCCL's output.

Buffer reuse: the buffer alternates between two halves by call parity. A peer may still be
reading half h when this rank starts its next call, but has finished with it before this rank
can write half h again two calls later: that needs this rank's previous kernel to have ended,
and its program 0 met the peer's program 0 of that call, which the peer starts only after the
kernel that read half h has ended on its stream. The grid is at most one program per SM (and at
most the programs the signal pad has flags for) so every program of every rank is resident and
none waits for a partner that cannot be scheduled; 16 warps of at most 128 registers, no
pipelining (num_stages=1), so one program fits an SM.

What was learnt from PyTorch's Triton code over symmetric memory (symm_mem_sync in
torch/distributed/_symmetric_memory/symm_mem_sync.py, and the kernels that call it),
written here from scratch: they meet same-index blocks with a 0 -> 1 / 1 -> 0 CAS on the pads,
release on the send when the block stored before it and acquire on the wait when it loads
after it, with a bar.sync (tl.debug_barrier) before the send and after the wait; the release and
acquire at system scope are the fence (no separate __threadfence_system). They run the CAS per
thread in inline PTX; this file uses `tl.atomic_cas` on a scalar pointer instead, which Triton
runs once per program (thread 0 alone; the old value is broadcast to every thread through shared
memory behind a bar.sync, so the spin loop's condition is the same in every thread). The cost:
the sends (and the waits) to the peers go one after the other rather than in parallel.

Alignment: Triton vectorises loads and stores (16 bytes a thread) only where it can prove
16-byte alignment. Tensor arguments it checks itself at launch; the peer addresses loaded from
the pointer array carry `tl.multiple_of(..., 16)` (true: symmetric allocations are at least
16-byte aligned, as the CUDA kernel's 16-byte accesses also assume) and every slot offset is a
multiple of 16 elements (slots are rounded up to that).
Sizes whose shard is not a multiple of 16 elements still run, element by element.

Buffers are cached per (shard size, dtype, device, group); the output is a fresh tensor every
call and x is never written.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

try:  # Triton only on GPU hosts: the file must still import (and be checked) without it.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the host
    triton = None

TILE_BYTES = 8192          # one 16-byte vector per thread per tile, as the CUDA kernel's 512 threads
NUM_WARPS = 16             # 512 threads
DEFAULT_SIGNAL_PAD_BYTES = 2048

if triton is not None:

    @triton.jit
    def _meet(pads, pid, rank, WORLD: tl.constexpr):
        """Program `pid` meets program `pid` of every peer (see the module docstring)."""
        tl.debug_barrier()  # every thread's stores of this program come before the flags
        for k in tl.static_range(1, WORLD):
            peer = (rank + k) % WORLD
            flag = tl.load(pads + peer).to(tl.pointer_type(tl.int32)) + pid * WORLD + rank
            while tl.atomic_cas(flag, 0, 1, sem="release", scope="sys") != 0:
                pass
        mine = tl.load(pads + rank).to(tl.pointer_type(tl.int32)) + pid * WORLD
        for k in tl.static_range(1, WORLD):
            peer = (rank + k) % WORLD
            while tl.atomic_cas(mine + peer, 1, 0, sem="acquire", scope="sys") != 1:
                pass
        tl.debug_barrier()  # every thread's loads of this program come after the flags

    @triton.jit(do_not_specialize=["parity", "rank"])
    def _all_gather_push(bufs, pads, x, out, n, slot, parity, rank,
                         WORLD: tl.constexpr, PEERS: tl.constexpr, BLOCK: tl.constexpr):
        # bufs, pads: int64 [WORLD], every rank's buffer / signal-pad address. x: n elements.
        # out: WORLD * n elements. Slot s of half h in rank q's buffer: bufs[q] + (h*WORLD + s)*slot.
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        ntiles = tl.cdiv(n, BLOCK)
        lane = tl.arange(0, BLOCK)
        half = parity * WORLD * slot
        for t in range(pid, ntiles, nprog):
            offs = t * BLOCK + lane
            mask = offs < n
            v = tl.load(x + offs, mask=mask)
            for k in tl.static_range(1, WORLD):
                peer = (rank + k) % WORLD
                base = tl.load(bufs + peer).to(tl.pointer_type(x.dtype.element_ty))
                dst = tl.multiple_of(base, 16) + half + rank * slot
                tl.store(dst + offs, v, mask=mask)
            tl.store(out + rank * n + offs, v, mask=mask)

        _meet(pads, pid, rank, WORLD)

        # Row j of the [PEERS, BLOCK] tile is peer (rank + 1 + j) % WORLD; rows from WORLD - 1 on
        # exist only because tl.arange needs a power of two, and are masked off.
        j = tl.arange(0, PEERS)
        row_ok = j < WORLD - 1
        src_rank = (rank + 1 + j) % WORLD
        own = tl.load(bufs + rank).to(tl.pointer_type(x.dtype.element_ty))
        src_rows = tl.multiple_of(own, 16) + half + src_rank * slot
        dst_rows = out + src_rank * n
        for t in range(pid, ntiles, nprog):
            offs = t * BLOCK + lane
            mask = row_ok[:, None] & (offs < n)[None, :]
            v = tl.load(src_rows[:, None] + offs[None, :], mask=mask, cache_modifier=".cg")
            tl.store(dst_rows[:, None] + offs[None, :], v, mask=mask)


class _State:
    """Buffers, pointer arrays and launch geometry for one (shard size, dtype, device, group)."""

    def __init__(self, n: int, dtype: torch.dtype, device: torch.device, group: dist.ProcessGroup):
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.n = n
        self.slot = -(-n // 16) * 16  # elements; a multiple of 16 keeps every slot 16-byte aligned
        if 2 * self.world * self.slot >= 2**31:
            raise ValueError("buffer beyond 2**31 elements: the kernel indexes in int32")
        self.buf = symm_mem.empty(max(2 * self.world * self.slot, 16), dtype=dtype, device=device)
        self.handle = symm_mem.rendezvous(self.buf, group.group_name)
        self.bufs = torch.tensor(list(self.handle.buffer_ptrs), dtype=torch.int64, device=device)
        self.pads = torch.tensor(list(self.handle.signal_pad_ptrs), dtype=torch.int64, device=device)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        # One 4-byte flag per (program, peer): the pad's size is the handle's where torch says
        # it, else the process-wide setting, else the long-standing default of 2048 bytes.
        pad_bytes = (getattr(self.handle, "signal_pad_size", None)
                     or getattr(symm_mem, "get_signal_pad_size", lambda: DEFAULT_SIGNAL_PAD_BYTES)())
        self.block = TILE_BYTES // torch.empty((), dtype=dtype).element_size()
        tiles = -(-n // self.block)
        self.grid = (max(1, min(tiles, sms, pad_bytes // 4 // self.world)),)
        self.peers = triton.next_power_of_2(max(self.world - 1, 1))
        self.calls = 0
        self.handle.barrier(channel=0)  # no peer flags a pad before every rank has its state

    def launch(self, x: torch.Tensor, out: torch.Tensor) -> None:
        parity = self.calls & 1
        self.calls += 1
        _all_gather_push[self.grid](
            self.bufs, self.pads, x, out, self.n, self.slot, parity, self.rank,
            WORLD=self.world, PEERS=self.peers, BLOCK=self.block,
            num_warps=NUM_WARPS, num_stages=1)


_states: dict = {}


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    if triton is None:
        raise RuntimeError("this candidate needs Triton (a CUDA host with the triton package)")
    x = x.contiguous()
    world = dist.get_world_size(group)
    out = torch.empty((world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    key = (n, x.dtype, x.device, group.group_name)
    state = _states.get(key)
    if state is None:
        state = _states[key] = _State(n, x.dtype, x.device, group)
    state.launch(x, out)
    return out
