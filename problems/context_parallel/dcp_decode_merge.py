"""Decode context parallelism: local attention on a KV-cache shard, LSE all-gather, reduce-scatter."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *,
              dcp_group: dist.ProcessGroup) -> torch.Tensor:
    """q: [B, H, D] one decode token per request, all heads (replicated on the DCP group);
    k_cache, v_cache: [B, L, Hkv, D] this rank's shard of every request's context.

    Each rank attends to its shard, all-gathers the per-head log-sum-exps, rescales its
    partial output by exp(lse_local - lse_global), and a reduce-scatter over heads sums the
    partials and leaves rank r with heads [r H/P, (r+1) H/P). Returns [B, H/P, D] in q.dtype.
    """
    world = dist.get_world_size(dcp_group)
    b, h, d = q.shape
    hkv = k_cache.shape[2]
    rep = h // hkv
    qf = q.float().view(b, hkv, rep, d)
    scores = torch.einsum("bgrd,blgd->bgrl", qf, k_cache.float()) * d ** -0.5
    lse = torch.logsumexp(scores, dim=-1)  # [B, Hkv, rep]
    probs = torch.exp(scores - lse.unsqueeze(-1))
    out = torch.einsum("bgrl,blgd->bgrd", probs, v_cache.float()).reshape(b, h, d)
    lse = lse.reshape(b, h).contiguous()
    lses = torch.empty((world * b, h), dtype=lse.dtype, device=lse.device)
    dist.all_gather_into_tensor(lses, lse, group=dcp_group)
    global_lse = torch.logsumexp(lses.view(world, b, h), dim=0)
    corrected = (out * torch.exp(lse - global_lse).unsqueeze(-1)).to(q.dtype)
    # Reduce-scatter along heads: put each destination rank's head slice first.
    send = corrected.view(b, world, h // world, d).transpose(0, 1).contiguous()
    result = torch.empty((b, h // world, d), dtype=q.dtype, device=q.device)
    dist.reduce_scatter_tensor(result, send.view(world * b, h // world, d), group=dcp_group)
    return result


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, h, hkv, d, l = (case["batch"], case["heads"], case["kv_heads"], case["head_dim"],
                       case["ctx_per_rank"])
    return {"q": case.randn(b, h, d, stream="q", shared=True),
            "k_cache": case.randn(b, l, hkv, d, stream="k"),
            "v_cache": case.randn(b, l, hkv, d, stream="v")}


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    b, h, hkv, d, l = s["batch"], s["heads"], s["kv_heads"], s["head_dim"], s["ctx_per_rank"]
    out_bytes = b * h * d * s.itemsize
    link = traffic.all_gather(p * b * h * 4, p) + traffic.reduce_scatter(out_bytes, p)
    kv = 2 * b * l * hkv * d * s.itemsize
    return Traffic(link_bytes=link, hbm_bytes=kv + out_bytes + out_bytes // p,
                   flops=4 * b * h * l * d)


PROBLEM = Problem(
    id=711,
    slug="dcp-decode-attention-merge",
    title="Decode context parallelism: partial attention + LSE all-gather + head reduce-scatter",
    description=(
        "For long-context decoding vLLM shards each request's KV cache across a decode-context-"
        "parallel group (interleaved tokens), so every rank attends the full set of query heads "
        "to its part of the context. The partial outputs are merged exactly like flash-decoding "
        "splits but across GPUs: cp_lse_ag_out_rs all-gathers the per-head log-sum-exps, "
        "rescales each partial output, and reduce-scatters over heads so each rank continues "
        "with H/P heads. The messages are KiB-sized and sit inside every layer of every decode "
        "step, so the merge is latency-bound; a fast kernel fuses the rescale into the "
        "attention epilogue and pushes each head slice straight to its owner."
    ),
    categories=("context",),
    source=Source("vLLM", "vllm/attention/ops/common.py: cp_lse_ag_out_rs",
                  "https://github.com/vllm-project/vllm"),
    collectives=("all_gather", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "heads": 8, "kv_heads": 2, "head_dim": 16, "ctx_per_rank": 24},
           "default": {"batch": 64, "heads": 64, "kv_heads": 8, "head_dim": 128,
                       "ctx_per_rank": 8192}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=lambda world_size: {"dcp_group": [list(range(world_size))]},
    tags=("inference", "latency"),
)
