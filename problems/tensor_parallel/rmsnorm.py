"""RMSNorm over a hidden dimension that is sharded across tensor-parallel ranks (vLLM MiniMax-Text-01)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS = 1e-6


def reference(x_shard: torch.Tensor, weight_shard: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x_shard: [tokens, hidden / tp], this rank's heads of the linear-attention output.
    world = dist.get_world_size(group)
    x = x_shard.float()
    # Mean of squares over the local slice; the shards are equal, so the mean of the local
    # means is the mean over the full hidden dimension.
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    dist.all_reduce(variance, op=dist.ReduceOp.SUM, group=group)
    variance = variance / world
    y = x * torch.rsqrt(variance + EPS)
    return (y * weight_shard.float()).to(x_shard.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    local = case["hidden"] // case.world_size
    return {
        "x_shard": case.randn(case["tokens"], local, stream="x"),
        "weight_shard": case.rand(local, stream="w", low=0.5, high=1.5),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens, local = s["tokens"], s["hidden"] // n
    # The only exchange is one fp32 statistic per token.
    stat_bytes = tokens * 4
    return Traffic(link_bytes=traffic.all_reduce(stat_bytes, n),
                   hbm_bytes=(2 * tokens * local + local) * e,
                   flops=4 * tokens * local)


PROBLEM = Problem(
    id=403,
    slug="tp-rmsnorm",
    title="Tensor-parallel RMSNorm over a sharded hidden dimension",
    description=(
        "MiniMax-Text-01's lightning-attention layers normalise the attention output while it is "
        "still split by heads across tensor-parallel ranks, so no rank sees a whole hidden vector. "
        "vLLM's MiniMaxText01RMSNormTP computes each token's mean of squares over the local slice "
        "in fp32, all-reduces that one number per token across the TP group, divides by the TP "
        "size, and scales the local slice by the rsqrt and by the rank's shard of the norm "
        "weight. The exchange is tiny (4 bytes per token) but sits between two memory-bound "
        "passes over the activations, so with a separate NCCL call the op costs a kernel launch, "
        "a collective's fixed latency and a second read of x; a fused kernel keeps the tile in "
        "registers or shared memory, writes its partial statistics straight into the peers' "
        "buffers and finishes the normalisation as soon as they arrive."
    ),
    categories=("tensor",),
    source=Source(
        "vLLM",
        "vllm/model_executor/layers/mamba/linear_attn.py: MiniMaxText01RMSNormTP._forward",
        "https://github.com/vllm-project/vllm"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 24, "hidden": 64},
           "default": {"tokens": 8192, "hidden": 6144}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("inference",),
    pkb_ids=(18,),
)
