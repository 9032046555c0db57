# ParallelKernelBench signature (reference/48_fsdp_and_tp.py): weights stored input-major, x @ W1;
# FSDP shards W1, W2 [D, F/tp] and W3 [F/tp, D] along D (W3 on dim 1); TP groups are consecutive
# ranks, FSDP groups strided by n_tp; the groups are built inside. Returns [T, D] summed over TP.
import torch
import torch.distributed as dist
import torch.nn.functional as F


def _groups(n_tp, n_fsdp):
    rank, mine = dist.get_rank(), {}
    # Every rank must create every group, in the same order.
    for first in range(0, n_tp * n_fsdp, n_tp):
        ranks = list(range(first, first + n_tp))
        group = dist.new_group(ranks)
        if rank in ranks:
            mine["tp"] = group
    for offset in range(n_tp):
        ranks = list(range(offset, n_tp * n_fsdp, n_tp))
        group = dist.new_group(ranks)
        if rank in ranks:
            mine["fsdp"] = group
    return mine["tp"], mine["fsdp"]


def _unshard(shard, group, dim):
    parts = [torch.empty_like(shard) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, shard.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


@torch.no_grad()
def solution(x_local, W1_shard, W2_shard, W3_shard, n_tp, n_fsdp):
    assert dist.get_world_size() == n_tp * n_fsdp
    tp_group, fsdp_group = _groups(n_tp, n_fsdp)
    gate = _unshard(W1_shard, fsdp_group, 0)
    up = _unshard(W2_shard, fsdp_group, 0)
    down = _unshard(W3_shard, fsdp_group, 1)
    out = (F.silu(x_local @ gate) * (x_local @ up)) @ down
    dist.all_reduce(out, group=tp_group)
    return out
