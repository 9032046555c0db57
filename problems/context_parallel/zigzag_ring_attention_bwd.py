"""Causal ring attention backward (zigzag layout): K/V and their gradients travel the ring."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _block_backward(q, k, v, dout, lse, delta, scale, causal):
    """Gradients of one attention block in float32.

    q, dout: [B, Sq, H, D]; k, v: [B, Sk, H, D]; lse, delta: [B, H, Sq] float32 (the forward's
    log-sum-exp and rowsum(dout * out)). Returns dq [B, Sq, H, D], dk, dv [B, Sk, H, D].
    """
    qf, kf, vf, df = q.float(), k.float(), v.float(), dout.float()
    scores = torch.einsum("bqhd,bkhd->bhqk", qf, kf) * scale
    if causal:
        n = q.shape[1]
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.exp(scores - lse.unsqueeze(-1))
    dv = torch.einsum("bhqk,bqhd->bkhd", probs, df)
    dprobs = torch.einsum("bqhd,bkhd->bhqk", df, vf)
    dscores = probs * (dprobs - delta.unsqueeze(-1))
    dq = torch.einsum("bhqk,bkhd->bqhd", dscores, kf) * scale
    dk = torch.einsum("bhqk,bqhd->bkhd", dscores, qf) * scale
    return dq, dk, dv


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


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
              dout: torch.Tensor, lse: torch.Tensor, *, cp_group: dist.ProcessGroup):
    """Backward of zigzag causal ring attention (layout as in the forward problem 702).

    q, k, v, out, dout: [B, 2C, H, D]; lse: [B, H, 2C] float32 from the forward.
    At step s this rank holds the K/V block of rank (r-s) mod P together with a float32 dK/dV
    accumulator for that block; it adds its contribution and passes both on. After P steps
    every accumulator has visited all ranks and one last hop returns it to its owner.
    Returns dq, dk, dv in q.dtype.
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    scale = q.shape[-1] ** -0.5
    half = q.shape[1] // 2
    delta = (dout.float() * out.float()).sum(-1).transpose(1, 2)  # [B, H, 2C]
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    k_cur, v_cur = k, v
    dk_acc = dv_acc = None
    for step in range(world):
        if step == 0:
            dq_b, dk_acc, dv_acc = _block_backward(q, k_cur, v_cur, dout, lse, delta, scale, True)
            dq += dq_b
        elif step <= rank:
            dq_b, dk_b, dv_b = _block_backward(q, k_cur[:, :half], v_cur[:, :half], dout, lse,
                                               delta, scale, False)
            dq += dq_b
            dk_acc[:, :half] += dk_b
            dv_acc[:, :half] += dv_b
        else:
            dq_b, dk_b, dv_b = _block_backward(q[:, half:], k_cur, v_cur, dout[:, half:],
                                               lse[:, :, half:], delta[:, :, half:], scale, False)
            dq[:, half:] += dq_b
            dk_acc += dk_b
            dv_acc += dv_b
        # Pass the gradient accumulators on (every step, the last hop returns them home) and
        # the K/V block for the next step (all but the last step), as one batch.
        if step + 1 < world:
            k_cur, v_cur, dk_acc, dv_acc = _ring_pass([k_cur, v_cur, dk_acc, dv_acc], cp_group)
        else:
            dk_acc, dv_acc = _ring_pass([dk_acc, dv_acc], cp_group)
    return dq.to(q.dtype), dk_acc.to(q.dtype), dv_acc.to(q.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, s, h, d = case["batch"], case["seq_per_rank"], case["heads"], case["head_dim"]
    n, r, c = case.world_size, case.rank, s // 2
    # Global positions of the local tokens (chunks r and 2P-1-r) give each query's number of
    # visible keys; the forward's lse is close to log(visible) + 1/2 for unit-variance scores.
    pos = torch.cat([torch.arange(r * c, (r + 1) * c),
                     torch.arange((2 * n - 1 - r) * c, (2 * n - r) * c)]).float()
    base = torch.log(pos + 1.0) + 0.5
    jitter = case.rand(b, h, s, stream="lse", dtype=torch.float32, high=0.25)
    lse = jitter if case.is_meta else base.to(jitter.device).view(1, 1, s) + jitter
    return {
        "q": case.randn(b, s, h, d, stream="q"),
        "k": case.randn(b, s, h, d, stream="k"),
        "v": case.randn(b, s, h, d, stream="v"),
        "out": case.randn(b, s, h, d, stream="out", std=1.0 / math.sqrt(max(c, 1))),
        "dout": case.randn(b, s, h, d, stream="dout"),
        "lse": lse,
    }


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    b, n, h, d = s["batch"], s["seq_per_rank"], s["heads"], s["head_dim"]
    blk = b * n * h * d * s.itemsize
    grad32 = b * n * h * d * 4
    link = (p - 1) * traffic.send_recv(2 * blk) + p * traffic.send_recv(2 * grad32)
    c = n // 2
    pairs = 2 * c * c * p
    # Backward is about 2.5x the forward's matmul work (recomputed scores, dP, dQ, dK, dV).
    return Traffic(link_bytes=link,
                   hbm_bytes=8 * blk + b * h * n * 4 + (p - 1) * 2 * blk + p * 4 * grad32,
                   flops=10 * b * h * d * pairs)


PROBLEM = Problem(
    id=703,
    slug="zigzag-ring-attention-bwd",
    title="Causal ring attention backward with zigzag load balancing (dK/dV ride the ring)",
    description=(
        "The backward pass of zigzag ring attention. Each rank recomputes block probabilities "
        "from the saved log-sum-exp, accumulates dQ locally, and computes this rank's share of "
        "dK/dV for whichever K/V block it holds; the float32 dK/dV accumulator travels around the "
        "ring together with its K/V block, and a final hop returns it to the owning rank. This "
        "is zigzag_ring_flash_attn_backward (and TransformerEngine's P2P context-parallel "
        "backward), where every step moves a K/V block plus a float32 gradient pair, about three "
        "times the forward's traffic. Fast kernels keep both streams in flight during the block "
        "backward, and can send gradients in bf16 or reduce them at the owner instead."
    ),
    categories=("context",),
    source=Source("ring-flash-attention",
                  "ring_flash_attn/zigzag_ring_flash_attn.py: zigzag_ring_flash_attn_backward",
                  "https://github.com/zhuzilin/ring-flash-attention"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq_per_rank": 16, "heads": 2, "head_dim": 16},
           "default": {"batch": 1, "seq_per_rank": 2048, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
    tags=("backward",),
)
