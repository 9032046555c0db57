"""An honest candidate for vocab-parallel-logprobs-top-k-top-p that filters as a kernel that
never sorts ascending would: it ranks tokens from the most likely down and keeps a token while
the mass ranked before it is below top_p. The same rule and tie order as the reference's, summed
from the other end, so a token near the cut can round to the other side
(tests/evaluator/test_decision_band.py)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def descending_filter(logits: torch.Tensor, top_k: int, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """[T, V] logits -> (filtered logits, keep mask), the reference's rule in descending order."""
    # Tied logits in the reference's order reversed: the reference drops the lowest vocabulary id
    # of a tie first, so from the top the highest id comes first.
    ascending, order = logits.sort(dim=-1, stable=True)
    ordered, order = ascending.flip(-1), order.flip(-1)
    k = min(top_k, logits.shape[-1])
    ordered = ordered.masked_fill(ordered < ordered[:, k - 1:k], float("-inf"))
    probs = ordered.float().softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs
    keep = before < top_p
    keep[:, 0] = True
    ordered = ordered.masked_fill(~keep, float("-inf"))
    filtered = torch.empty_like(ordered).scatter_(-1, order, ordered)
    return filtered, torch.empty_like(keep).scatter_(-1, order, keep)


def solution(logits: torch.Tensor, target: torch.Tensor, top_k: int, top_p: float, *,
             tp_group: dist.ProcessGroup) -> torch.Tensor:
    world, rank = dist.get_world_size(tp_group), dist.get_rank(tp_group)
    batch, seq, part = logits.shape
    tokens = batch * seq
    recv = torch.empty((world, tokens // world, part), dtype=logits.dtype, device=logits.device)
    dist.all_to_all_single(recv, logits.reshape(tokens, part).contiguous(), group=tp_group)
    mine = recv.permute(1, 0, 2).reshape(tokens // world, world * part)
    filtered, _ = descending_filter(mine, top_k, top_p)
    log_probs = filtered.float().log_softmax(dim=-1)
    local = target.reshape(-1)[rank * (tokens // world): (rank + 1) * (tokens // world)]
    picked = log_probs.gather(-1, local.unsqueeze(-1)).squeeze(-1).contiguous()
    out = torch.empty(tokens, dtype=picked.dtype, device=picked.device)
    dist.all_gather_into_tensor(out, picked, group=tp_group)
    return out.reshape(batch, seq)
