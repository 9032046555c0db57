"""Causal ring attention forward over P steps with the load-balanced zigzag layout."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _block_attention(q, k, v, scale, causal):
    """Attention of q [B, Sq, H, D] on k, v [B, Sk, H, D] in float32 -> (out, lse [B, H, Sq]).

    causal=True is only used on the diagonal block (Sq == Sk, same positions).
    """
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    if causal:
        n = q.shape[1]
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1))
    return torch.einsum("bhqk,bkhd->bqhd", probs, v.float()), lse


def _merge(out, lse, block_out, block_lse):
    if out is None:
        return block_out, block_lse
    new_lse = torch.logaddexp(lse, block_lse)
    w_old = torch.exp(lse - new_lse).transpose(1, 2).unsqueeze(-1)
    w_new = torch.exp(block_lse - new_lse).transpose(1, 2).unsqueeze(-1)
    return out * w_old + block_out * w_new, new_lse


def _ring_pass(tensors, group):
    """Send each tensor to rank+1 and receive the same shapes from rank-1 in one batch."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    send_to = dist.get_global_rank(group, (rank + 1) % world)
    recv_from = dist.get_global_rank(group, (rank - 1) % world)
    tensors = [t.contiguous() for t in tensors]
    received = [torch.empty_like(t) for t in tensors]
    ops = []
    for t, r in zip(tensors, received):
        ops.append(dist.P2POp(dist.isend, t, send_to, group=group))
        ops.append(dist.P2POp(dist.irecv, r, recv_from, group=group))
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return received


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              cp_group: dist.ProcessGroup):
    """Zigzag causal ring attention.

    The global sequence is cut into 2P chunks of C tokens; rank r holds chunks r and 2P-1-r
    concatenated: q, k, v are [B, 2C, H, D]. Step 0 attends causally to the local block; at
    step s the held K/V block comes from rank (r-s) mod P: if it is an earlier rank (s <= r),
    all local queries see only its first chunk; otherwise only the second local query chunk
    sees the whole block. Returns out [B, 2C, H, D] (q.dtype) and lse [B, H, 2C] (float32).
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    scale = q.shape[-1] ** -0.5
    half = q.shape[1] // 2
    out, lse = None, None
    k_cur, v_cur = k, v
    for step in range(world):
        if step == 0:
            block_out, block_lse = _block_attention(q, k_cur, v_cur, scale, causal=True)
            out, lse = _merge(out, lse, block_out, block_lse)
        elif step <= rank:
            block_out, block_lse = _block_attention(q, k_cur[:, :half], v_cur[:, :half], scale, False)
            out, lse = _merge(out, lse, block_out, block_lse)
        else:
            block_out, block_lse = _block_attention(q[:, half:], k_cur, v_cur, scale, False)
            o2, l2 = _merge(out[:, half:], lse[:, :, half:], block_out, block_lse)
            out = torch.cat([out[:, :half], o2], dim=1)
            lse = torch.cat([lse[:, :, :half], l2], dim=2)
        if step + 1 < world:
            # The real code posts this exchange before the step's attention to overlap them.
            k_cur, v_cur = _ring_pass([k_cur, v_cur], cp_group)
    return out.to(q.dtype), lse


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, s, h, d = case["batch"], case["seq_per_rank"], case["heads"], case["head_dim"]
    return {"q": case.randn(b, s, h, d, stream="q"),
            "k": case.randn(b, s, h, d, stream="k"),
            "v": case.randn(b, s, h, d, stream="v")}


def roofline(s: Setting) -> Traffic:
    n_ranks = s.world_size
    b, n, h, d = s["batch"], s["seq_per_rank"], s["heads"], s["head_dim"]
    blk = b * n * h * d * s.itemsize
    # P-1 K/V blocks pass through every rank.
    link = (n_ranks - 1) * traffic.send_recv(2 * blk)
    # Causal work is balanced: the diagonal step is ~2C^2 query-key pairs (causal half of
    # 2C x 2C) and each of the P-1 other steps is 2C x C, so about 2 C^2 P pairs per rank.
    c = n // 2
    pairs = 2 * c * c * n_ranks
    return Traffic(link_bytes=link,
                   hbm_bytes=3 * blk + (n_ranks - 1) * 2 * blk + blk + b * h * n * 4,
                   flops=4 * b * h * d * pairs)


PROBLEM = Problem(
    id=702,
    slug="zigzag-ring-attention-fwd",
    title="Causal ring attention forward with zigzag load balancing",
    description=(
        "Full forward of causal ring attention as used for long-context training: the sequence "
        "is cut into 2P chunks and rank r holds chunks r and 2P-1-r, so every rank does the "
        "same amount of causal work. Over P steps the K/V blocks circulate around the ring with "
        "batched send/recv; depending on whether the arriving block is from an earlier or a "
        "later rank, all local queries attend to its first half or the second local query chunk "
        "attends to all of it, and partial results are merged with log-sum-exp rescaling. This "
        "is zigzag_ring_flash_attn_forward and the P2P path of TransformerEngine/Megatron context "
        "parallelism. With 64 MiB of K/V per step the transfer is comparable to a step's "
        "attention, so the win comes from keeping the next block in flight during the current "
        "step and from a fused block-attention + merge kernel."
    ),
    categories=("context",),
    source=Source("ring-flash-attention",
                  "ring_flash_attn/zigzag_ring_flash_attn.py: zigzag_ring_flash_attn_forward",
                  "https://github.com/zhuzilin/ring-flash-attention"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq_per_rank": 16, "heads": 2, "head_dim": 16},
           "default": {"batch": 1, "seq_per_rank": 4096, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
