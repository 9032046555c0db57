"""Sliding-window attention under context parallelism: a K/V halo from the previous rank."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, window: int,
              q_block: int, cp_group: dist.ProcessGroup) -> torch.Tensor:
    """Causal sliding-window attention (query i sees keys i-window < j <= i).

    q: [B, S, H, D], k, v: [B, S, Hkv, D] for this rank's contiguous S tokens (window <= S).
    The last window-1 keys/values go to rank+1; rank-1's arrive as the halo. Queries are
    processed in blocks of q_block rows to keep the score matrix small.
    Returns [B, S, H, D] in q.dtype.
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    halo_len = window - 1
    b, s, h, d = q.shape
    hkv = k.shape[2]
    ops = []
    if rank + 1 < world:
        nxt = dist.get_global_rank(cp_group, rank + 1)
        ops.append(dist.P2POp(dist.isend, k[:, s - halo_len:].contiguous(), nxt, group=cp_group))
        ops.append(dist.P2POp(dist.isend, v[:, s - halo_len:].contiguous(), nxt, group=cp_group))
    if rank > 0:
        prv = dist.get_global_rank(cp_group, rank - 1)
        halo_k = torch.empty((b, halo_len, hkv, d), dtype=k.dtype, device=k.device)
        halo_v = torch.empty_like(halo_k)
        ops.append(dist.P2POp(dist.irecv, halo_k, prv, group=cp_group))
        ops.append(dist.P2POp(dist.irecv, halo_v, prv, group=cp_group))
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    if rank > 0:
        k_ext, v_ext, offset = torch.cat([halo_k, k], 1), torch.cat([halo_v, v], 1), halo_len
    else:
        k_ext, v_ext, offset = k, v, 0
    rep = h // hkv
    scale = d ** -0.5
    out = torch.empty((b, s, h, d), dtype=torch.float32, device=q.device)
    for start in range(0, s, q_block):
        stop = min(start + q_block, s)
        # Keys (in k_ext coordinates) that these queries can see.
        lo = max(0, start + offset - halo_len)
        hi = stop + offset
        kb = k_ext[:, lo:hi].repeat_interleave(rep, dim=2).float()
        vb = v_ext[:, lo:hi].repeat_interleave(rep, dim=2).float()
        scores = torch.einsum("bqhd,bkhd->bhqk", q[:, start:stop].float(), kb) * scale
        qpos = torch.arange(start, stop, device=q.device).unsqueeze(1) + offset
        kpos = torch.arange(lo, hi, device=q.device).unsqueeze(0)
        visible = (kpos <= qpos) & (kpos > qpos - window)
        probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        out[:, start:stop] = torch.einsum("bhqk,bkhd->bqhd", probs, vb)
    return out.to(q.dtype)


def make_inputs(case: Case) -> dict:
    b, s, h, hkv, d = (case["batch"], case["seq_per_rank"], case["heads"], case["kv_heads"],
                       case["head_dim"])
    return {"q": case.randn(b, s, h, d, stream="q"),
            "k": case.randn(b, s, hkv, d, stream="k"),
            "v": case.randn(b, s, hkv, d, stream="v"),
            "window": case["window"], "q_block": case["q_block"]}


def roofline(s: Setting) -> Traffic:
    b, n, h, hkv, d, w = (s["batch"], s["seq_per_rank"], s["heads"], s["kv_heads"],
                          s["head_dim"], s["window"])
    halo = 2 * b * (w - 1) * hkv * d * s.itemsize
    q_bytes = b * n * h * d * s.itemsize
    kv = 2 * b * n * hkv * d * s.itemsize
    return Traffic(link_bytes=traffic.send_recv(halo),
                   hbm_bytes=2 * q_bytes + kv + halo,
                   flops=4 * b * h * d * n * w)


PROBLEM = Problem(
    id=709,
    slug="cp-sliding-window-attention",
    title="Context-parallel sliding-window attention with a K/V halo exchange",
    description=(
        "For sliding-window attention (Mistral/Gemma-style local layers) under context "
        "parallelism with contiguous sequence shards, a rank's queries only need the last "
        "window-1 keys and values of the previous rank. Ring sliding-window attention passes K/V "
        "blocks to the next rank for as many rounds as the window spans; with the window no "
        "longer than the shard a single halo of window-1 tokens suffices, which is what this "
        "reference sends. The halo (16 MiB here) gates the first window of queries only, so a "
        "fast kernel starts on the interior queries at once and finishes the boundary block "
        "when the halo lands, or reads it straight from the neighbour's memory."
    ),
    categories=("context",),
    source=Source("ring-sliding-window-attention",
                  "ring_swa/sliding_window/nonvarlen.py: RingSlidingWindowAttn.forward",
                  "https://github.com/XunhaoLai/ring-sliding-window-attention"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq_per_rank": 16, "heads": 4, "kv_heads": 2, "head_dim": 16,
                     "window": 6, "q_block": 8},
           "default": {"batch": 1, "seq_per_rank": 8192, "heads": 32, "kv_heads": 8,
                       "head_dim": 128, "window": 4096, "q_block": 1024}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
