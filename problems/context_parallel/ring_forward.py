"""The whole forward pass of plain (contiguous-chunk) ring attention, shared by the problems that
compose it with other parallelisms. Not a problem itself (no PROBLEM); the registry skips it."""

from __future__ import annotations

import torch
import torch.distributed as dist


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
           causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of q [B, Sq, H, D] on one K/V block [B, Sk, H, D] in float32, causal within the
    block when asked (the diagonal block). Returns the block output [B, Sq, H, D] and its
    log-sum-exp [B, H, Sq]."""
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * q.shape[-1] ** -0.5
    if causal:
        future = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.einsum("bhqk,bkhd->bqhd", torch.exp(scores - lse.unsqueeze(-1)), v.float())
    return out, lse


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
                   cp_group: dist.ProcessGroup) -> torch.Tensor:
    """Rank r of the ring holds chunk r of the sequence. Each step passes the held K/V block to
    rank + 1 and receives one from rank - 1 (batch_isend_irecv), attends to the held block and
    folds it into the running output with the log-sum-exp merge; with causal masking a block
    from a later chunk is skipped. Returns the output [B, S/P, H, D] in q's dtype."""
    world, rank = dist.get_world_size(cp_group), dist.get_rank(cp_group)
    send_to = dist.get_global_rank(cp_group, (rank + 1) % world)
    recv_from = dist.get_global_rank(cp_group, (rank - 1) % world)
    out = lse = None
    for step in range(world):
        if step + 1 < world:
            next_k, next_v = torch.empty_like(k), torch.empty_like(v)
            reqs = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, k, send_to, group=cp_group),
                dist.P2POp(dist.irecv, next_k, recv_from, group=cp_group),
                dist.P2POp(dist.isend, v, send_to, group=cp_group),
                dist.P2POp(dist.irecv, next_v, recv_from, group=cp_group)])
        source = (rank - step) % world  # whose chunk of K/V is held at this step
        if not causal or source <= rank:
            block_out, block_lse = attend(q, k, v, causal and source == rank)
            if out is None:
                out, lse = block_out, block_lse
            else:
                merged = torch.logaddexp(lse, block_lse)
                out = (out * torch.exp(lse - merged).transpose(1, 2).unsqueeze(-1)
                       + block_out * torch.exp(block_lse - merged).transpose(1, 2).unsqueeze(-1))
                lse = merged
        if step + 1 < world:
            for req in reqs:
                req.wait()
            k, v = next_k, next_v
    return out.to(q.dtype)


def ring_link_bytes(batch: int, seq_local: int, heads: int, head_dim: int, itemsize: int,
                    ring: int) -> float:
    """Every rank must see every earlier K/V chunk of the ring: (P - 1) blocks of K and V."""
    return (ring - 1) * 2 * batch * seq_local * heads * head_dim * itemsize


def causal_attention_flops(batch: int, seq_local: int, seq: int, heads: int, head_dim: int,
                           ring_rank_share: float = 0.5) -> float:
    """QK^T and PV for a causal chunk, counted as half of a full [seq_local x seq] block."""
    return 4.0 * batch * heads * seq_local * seq * head_dim * ring_rank_share
