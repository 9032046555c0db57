"""Context-parallel causal attention by all-gathering K/V (Megatron/TE "all_gather" CP, Llama 3)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _prefix_attention(q, k, v, q_start, scale):
    """Causal attention of a query chunk starting at global position q_start on keys 0..Sk-1.

    q: [B, Sq, H, D]; k, v: [B, Sk, H, D] with Sk = q_start + Sq. Float32 math.
    """
    sq, sk = q.shape[1], k.shape[1]
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    qpos = torch.arange(q_start, q_start + sq, device=q.device).unsqueeze(1)
    kpos = torch.arange(sk, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(kpos > qpos, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", probs, v.float())


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              cp_group: dist.ProcessGroup) -> torch.Tensor:
    """q: [B, 2C, H, D]; k, v: [B, 2C, Hkv, D] (grouped-query heads), zigzag layout: rank r
    holds global chunks r and 2P-1-r of C tokens. K and V are all-gathered, put back in
    sequence order, and each local query chunk attends causally to the keys before it.
    Returns the attention output [B, 2C, H, D] in q.dtype.
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    b, s, h, d = q.shape
    hkv, c = k.shape[2], s // 2
    gathered = []
    for t in (k, v):
        buf = torch.empty((world * b,) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
        dist.all_gather_into_tensor(buf, t.contiguous(), group=cp_group)
        buf = buf.view((world,) + tuple(t.shape))
        # Back to sequence order: chunk j from rank j's first half, chunk 2P-1-j from its second.
        chunks = [None] * (2 * world)
        for j in range(world):
            chunks[j] = buf[j, :, :c]
            chunks[2 * world - 1 - j] = buf[j, :, c:]
        full = torch.cat(chunks, dim=1)
        gathered.append(full.repeat_interleave(h // hkv, dim=2))
    k_full, v_full = gathered
    scale = d ** -0.5
    outs = []
    for i, chunk in enumerate((rank, 2 * world - 1 - rank)):
        end = (chunk + 1) * c
        outs.append(_prefix_attention(q[:, i * c:(i + 1) * c], k_full[:, :end], v_full[:, :end],
                                      chunk * c, scale))
    return torch.cat(outs, dim=1).to(q.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, s, h, hkv, d = (case["batch"], case["seq_per_rank"], case["heads"], case["kv_heads"],
                       case["head_dim"])
    return {"q": case.randn(b, s, h, d, stream="q"),
            "k": case.randn(b, s, hkv, d, stream="k"),
            "v": case.randn(b, s, hkv, d, stream="v")}


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    b, n, h, hkv, d = s["batch"], s["seq_per_rank"], s["heads"], s["kv_heads"], s["head_dim"]
    kv_local = 2 * b * n * hkv * d * s.itemsize
    q_bytes = b * n * h * d * s.itemsize
    c = n // 2
    # Chunk r sees (r+1)C keys and chunk 2P-1-r sees (2P-r)C: (2P+1)C keys over 2 chunks,
    # halved on the diagonal; about (2P+1) C^2 query-key pairs per rank.
    pairs = (2 * p + 1) * c * c
    return Traffic(link_bytes=traffic.all_gather(p * kv_local, p),
                   hbm_bytes=q_bytes + p * kv_local + q_bytes,
                   flops=4 * b * h * d * pairs)


PROBLEM = Problem(
    id=704,
    slug="cp-allgather-kv-attention",
    title="Context-parallel causal attention with all-gathered K/V (GQA, zigzag layout)",
    description=(
        "Instead of a ring, each context-parallel rank all-gathers the keys and values of the "
        "whole sequence and computes causal attention for its two load-balanced query chunks "
        "against the key prefix each needs. This is the \"all_gather\" communication type of "
        "TransformerEngine/Megatron context parallelism and the scheme Llama 3 used for long "
        "context, attractive with grouped-query attention because K/V are 4-8x smaller than Q. "
        "The gathered K/V is P x the local block (up to 64 MiB here) and sits before the "
        "attention on the critical path; fast kernels start on the local and early chunks while "
        "the rest arrive, or read peers' K/V directly inside the attention kernel."
    ),
    categories=("context",),
    source=Source("TransformerEngine",
                  "transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py: "
                  "AttnFuncWithCPAndKVAllGather.forward",
                  "https://github.com/NVIDIA/TransformerEngine"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq_per_rank": 16, "heads": 4, "kv_heads": 2, "head_dim": 16},
           "default": {"batch": 1, "seq_per_rank": 2048, "heads": 32, "kv_heads": 8,
                       "head_dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
