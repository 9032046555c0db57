# ParallelKernelBench signature (reference/54_ring_attention.py): q, k, v [B, S/P, H, D] are rank r's
# contiguous chunk of the sequence; K/V blocks travel round the ring (to rank + 1 of `group`), and
# under `causal` a rank attends only to chunks up to its own, masking the diagonal one. The scale
# defaults to D ** -0.5; the result is in q's dtype. group None means the default group.
from typing import Optional

import torch
import torch.distributed as dist


def _block(q, k, v, scale, mask_diagonal):
    """Attention of q on one K/V block in float32: output [B, Sq, H, D], log-sum-exp [B, H, Sq]."""
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    if mask_diagonal:
        above = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(above, float("-inf"))
    lse = scores.logsumexp(dim=-1)
    probs = (scores - lse.unsqueeze(-1)).exp()
    return torch.einsum("bhqk,bkhd->bqhd", probs, v.float()), lse


@torch.no_grad()
def solution(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             softmax_scale: Optional[float] = None, causal: bool = False,
             group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    group = group or dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    after = dist.get_global_rank(group, (rank + 1) % world)
    before = dist.get_global_rank(group, (rank - 1) % world)
    k, v = k.contiguous(), v.contiguous()
    outs, lses = [], []
    for step in range(world):
        pending = []
        if step + 1 < world:
            next_k, next_v = torch.empty_like(k), torch.empty_like(v)
            pending = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, k, after, group=group),
                dist.P2POp(dist.isend, v, after, group=group),
                dist.P2POp(dist.irecv, next_k, before, group=group),
                dist.P2POp(dist.irecv, next_v, before, group=group)])
        # At step s this rank holds the chunk of rank - s; later chunks are all masked.
        if not causal or step <= rank:
            out, lse = _block(q, k, v, scale, causal and step == 0)
            outs.append(out)
            lses.append(lse)
        for request in pending:
            request.wait()
        if pending:
            k, v = next_k, next_v
    # Fold the blocks by their share of the total softmax mass.
    total = torch.stack(lses).logsumexp(dim=0)
    merged = sum(o * (l - total).exp().transpose(1, 2).unsqueeze(-1) for o, l in zip(outs, lses))
    return merged.to(q.dtype)
