"""LIBRARY CODE, a baseline row: all-reduce (problem "all-reduce") through PyTorch's own
symmetric-memory ops, not a hand-written kernel.

Below 1 MiB on 2 ranks (256 KiB on more), `torch.ops.symm_mem.one_shot_all_reduce_copy_out`
(each rank copies its input into its symmetric buffer inside the kernel, the blocks meet, and
every rank reads every peer's buffer); above, `two_shot_all_reduce_out` (each rank reduces
1/world of the buffer from every peer and the result is gathered back), after copying x into
the symmetric buffer, which that op overwrites. The thresholds are those of
solutions/symm_mem/all_reduce_two_shot.py, so the two rows compare like for like. Both ops run
without NVLink multicast (P2P loads and stores only); the multimem_* ops are never used.

Why two buffers: PyTorch's kernels meet their peers before they read, not necessarily after, so
a rank could refill a buffer that a slower peer still reads. Alternating two buffers by call
parity removes that race: a rank reaches call k+2 only after meeting every peer in call k+1,
which the peers start after call k has ended on their streams.

The buffer is padded with zeros to whole 16-byte vectors per rank (the ops' alignment); the
padding sums to zero and is cut off the output.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

ONE_SHOT_MAX_BYTES = {2: 1 << 20}
ONE_SHOT_MAX_BYTES_DEFAULT = 256 << 10
_states: dict = {}


class _State:
    def __init__(self, n: int, dtype: torch.dtype, device: torch.device, group: dist.ProcessGroup):
        world = dist.get_world_size(group)
        itemsize = torch.empty((), dtype=dtype).element_size()
        per = world * (16 // itemsize)
        self.padded = -(-n // per) * per
        self.one_shot = n * itemsize <= ONE_SHOT_MAX_BYTES.get(world, ONE_SHOT_MAX_BYTES_DEFAULT)
        self.group_name = group.group_name
        self.bufs = []
        for _ in range(2):
            buf = symm_mem.empty(self.padded, dtype=dtype, device=device)
            buf.zero_()
            symm_mem.rendezvous(buf, self.group_name)
            self.bufs.append(buf)
        self.calls = 0
        dist.barrier(group=group)  # every rank's buffers are zeroed before any peer reads them


def solution(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    n = x.numel()
    key = (n, x.dtype, x.device, group.group_name)
    state = _states.get(key)
    if state is None:
        state = _states[key] = _State(n, x.dtype, x.device, group)
    buf = state.bufs[state.calls & 1]
    state.calls += 1
    out = torch.empty(state.padded, dtype=x.dtype, device=x.device)
    flat = x.reshape(-1)
    ops = torch.ops.symm_mem
    if state.one_shot and state.padded == n and hasattr(ops, "one_shot_all_reduce_copy_out"):
        ops.one_shot_all_reduce_copy_out(buf, flat, "sum", state.group_name, out)
    else:
        buf[:n].copy_(flat)
        if state.one_shot:
            ops.one_shot_all_reduce_out(buf, "sum", state.group_name, out)
        elif hasattr(ops, "two_shot_all_reduce_out"):
            ops.two_shot_all_reduce_out(buf, "sum", state.group_name, out)
        else:  # older torch: the in-place op, then a copy out of the symmetric buffer
            out.copy_(ops.two_shot_all_reduce_(buf, "sum", state.group_name))
    return (out if state.padded == n else out[:n]).view(x.shape)
