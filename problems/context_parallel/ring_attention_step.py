"""One step of ring attention: pass the held K/V block to the next rank while attending to it."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Full (non-causal) attention of q [B, Sq, H, D] on k, v [B, Sk, H, D] in float32.

    Returns the normalised block output [B, Sq, H, D] and its log-sum-exp [B, H, Sq].
    """
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1))
    out = torch.einsum("bhqk,bkhd->bqhd", probs, v.float())
    return out, lse


def _merge(out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor,
           block_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine two softmax-normalised partial outputs with their log-sum-exps."""
    new_lse = torch.logaddexp(lse, block_lse)
    w_old = torch.exp(lse - new_lse).transpose(1, 2).unsqueeze(-1)  # [B, S, H, 1]
    w_new = torch.exp(block_lse - new_lse).transpose(1, 2).unsqueeze(-1)
    return out * w_old + block_out * w_new, new_lse


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
              lse: torch.Tensor, *, cp_group: dist.ProcessGroup):
    """Ring step: send (k, v) to rank+1, receive the next block from rank-1, attend q to the
    block held now and fold it into the running (out, lse).

    q, k, v: [B, S, H, D] (k, v: the block this rank holds at this step); out: [B, S, H, D]
    float32 running output; lse: [B, H, S] float32 running log-sum-exp.
    Returns (new_out float32, new_lse float32, next_k, next_v).
    """
    rank = dist.get_rank(cp_group)
    world = dist.get_world_size(cp_group)
    send_to = dist.get_global_rank(cp_group, (rank + 1) % world)
    recv_from = dist.get_global_rank(cp_group, (rank - 1) % world)
    next_k = torch.empty_like(k)
    next_v = torch.empty_like(v)
    ops = [
        dist.P2POp(dist.isend, k, send_to, group=cp_group),
        dist.P2POp(dist.irecv, next_k, recv_from, group=cp_group),
        dist.P2POp(dist.isend, v, send_to, group=cp_group),
        dist.P2POp(dist.irecv, next_v, recv_from, group=cp_group),
    ]
    reqs = dist.batch_isend_irecv(ops)
    # The attention on the held block overlaps the transfer in the real code.
    block_out, block_lse = _block_attention(q, k, v, q.shape[-1] ** -0.5)
    new_out, new_lse = _merge(out, lse, block_out, block_lse)
    for req in reqs:
        req.wait()
    return new_out, new_lse, next_k, next_v


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, s, h, d = case["batch"], case["seq_per_rank"], case["heads"], case["head_dim"]
    return {
        "q": case.randn(b, s, h, d, stream="q"),
        "k": case.randn(b, s, h, d, stream="k"),
        "v": case.randn(b, s, h, d, stream="v"),
        # State after some earlier steps: an output of unit scale and an lse near log(S).
        "out": case.randn(b, s, h, d, stream="out", dtype=torch.float32, std=0.1),
        "lse": case.rand(b, h, s, stream="lse", dtype=torch.float32,
                         low=0.5 * math.log(s), high=1.5 * math.log(s)),
    }


def roofline(s: Setting) -> Traffic:
    b, n, h, d = s["batch"], s["seq_per_rank"], s["heads"], s["head_dim"]
    blk = b * n * h * d * s.itemsize
    state = b * n * h * d * 4 + b * h * n * 4
    kv = 2 * blk
    # Send k, v to one peer and receive the next pair from another (same size both ways).
    return Traffic(link_bytes=traffic.send_recv(kv),
                   hbm_bytes=3 * blk + 2 * state + kv,
                   flops=4 * b * h * n * n * d)


PROBLEM = Problem(
    id=701,
    slug="ring-attention-step",
    title="Ring attention: one step (pass K/V on, attend, merge with log-sum-exp)",
    description=(
        "The inner loop of ring attention: each context-parallel rank keeps its query chunk and a "
        "running (output, log-sum-exp) pair, and at every step passes the K/V block it holds to "
        "rank+1 while receiving the next one from rank-1, attends its queries to the held block "
        "and rescales the running output with the log-sum-exp merge. The reference does one "
        "non-causal step with batch_isend_irecv, as ring-flash-attention's forward loop and "
        "TransformerEngine's P2P context parallelism do. The K/V block is tens of MiB per step "
        "and must arrive before the next step starts, so a fast kernel pushes it to the peer "
        "directly over NVLink while the attention runs, and fuses the merge into the attention "
        "epilogue instead of re-reading the float32 state."
    ),
    categories=("context",),
    source=Source("ring-flash-attention",
                  "ring_flash_attn/ring_flash_attn.py: ring_flash_attn_forward "
                  "(utils.py: RingComm.send_recv, update_out_and_lse)",
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
