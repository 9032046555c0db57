"""LayerNorm backward on a sequence-parallel shard with the weight gradients all-reduced over TP."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS = 1e-5


def reference(x_shard: torch.Tensor, grad_output: torch.Tensor, gamma: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # x_shard, grad_output: [tokens / tp, hidden], this rank's slice of the sequence.
    # gamma: [hidden], the replicated layer-norm weight.
    x = x_shard.float()
    dy = grad_output.float()
    mean = x.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + EPS)
    xhat = (x - mean) * rstd
    dxhat = dy * gamma.float()
    dx = rstd * (dxhat - dxhat.mean(dim=-1, keepdim=True)
                 - xhat * (dxhat * xhat).mean(dim=-1, keepdim=True))
    # Weight gradients of this rank's tokens, kept in fp32 (Megatron's main_grad), then summed
    # over the sequence-parallel ranks in one coalesced all-reduce.
    wgrads = torch.stack([(dy * xhat).sum(dim=0), dy.sum(dim=0)])
    dist.all_reduce(wgrads, op=dist.ReduceOp.SUM, group=group)
    return dx.to(x_shard.dtype), wgrads[0], wgrads[1]


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    local = case["tokens"] // case.world_size
    hidden = case["hidden"]
    return {
        "x_shard": case.randn(local, hidden, stream="x"),
        "grad_output": case.randn(local, hidden, stream="dy"),
        "gamma": case.rand(hidden, stream="gamma", shared=True, low=0.5, high=1.5),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    local, hidden = s["tokens"] // n, s["hidden"]
    wgrad_bytes = 2 * hidden * 4
    hbm = 3 * local * hidden * e + hidden * e + wgrad_bytes
    return Traffic(link_bytes=traffic.all_reduce(wgrad_bytes, n), hbm_bytes=hbm,
                   flops=12 * local * hidden)


PROBLEM = Problem(
    id=413,
    slug="tp-sp-layernorm-backward",
    title="Sequence-parallel LayerNorm backward with TP all-reduce of weight gradients",
    description=(
        "Under Megatron-LM sequence parallelism the layer norms run on each tensor-parallel "
        "rank's slice of the tokens with a replicated weight, so their backward gives a complete "
        "input gradient for the local tokens but only a partial weight and bias gradient; "
        "Megatron marks these parameters sequence_parallel and sums their fp32 gradients over "
        "the TP group in one coalesced all-reduce (_allreduce_non_tensor_model_parallel_grads). "
        "The backward itself is memory-bound (read x and dy, write dx) and the exchange is only "
        "2 x hidden floats, so the cost is dominated by the extra pass and the collective's "
        "fixed latency. A fused kernel reduces the per-block column sums on chip, writes them "
        "directly into the peers' buffers and finishes with a single small reduction instead of "
        "a separate reduction kernel plus an NCCL call."
    ),
    categories=("tensor", "sequence"),
    source=Source(
        "Megatron-LM",
        "megatron/core/distributed/finalize_model_grads.py: _allreduce_non_tensor_model_parallel_grads "
        "(layer-norm backward: transformer_engine/pytorch/module/layernorm.py)",
        "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 32, "hidden": 48},
           "default": {"tokens": 16384, "hidden": 8192}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("backward",),
)
