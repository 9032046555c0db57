"""ZeRO-1 optimizer step: AdamW on this rank's shard of the fp32 master weights, then an
all-gather of the updated model-precision parameters (DeepSpeed ZeRO stage 1 / Megatron-LM
distributed optimizer)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

BETA1, BETA2, EPS = 0.9, 0.95, 1e-8


def reference(grad: torch.Tensor, master_shard: torch.Tensor, exp_avg: torch.Tensor,
              exp_avg_sq: torch.Tensor, param_buffer: torch.Tensor, step: int, lr: float,
              weight_decay: float, *, group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    rank = dist.get_rank(group)
    shard = master_shard.numel()
    # The fp32 gradient buffer is already averaged over data parallelism; each rank reads only
    # the slice that matches the master weights (and Adam moments) it owns.
    g = grad.narrow(0, rank * shard, shard)
    # AdamW as the fused multi-tensor Adam kernels do it: decoupled weight decay, bias correction.
    exp_avg.mul_(BETA1).add_(g, alpha=1.0 - BETA1)
    exp_avg_sq.mul_(BETA2).addcmul_(g, g, value=1.0 - BETA2)
    bias1 = 1.0 - BETA1 ** step
    bias2 = 1.0 - BETA2 ** step
    denom = (exp_avg_sq / bias2).sqrt_().add_(EPS)
    update = (exp_avg / bias1).div_(denom).add_(master_shard, alpha=weight_decay)
    master_shard.add_(update, alpha=-lr)
    # Copy the updated shard into this rank's view of the model-precision parameter buffer,
    # then all-gather the buffer so every rank has the full updated parameters.
    local = param_buffer.narrow(0, rank * shard, shard)
    local.copy_(master_shard)
    dist.all_gather_into_tensor(param_buffer, local.clone(), group=group)
    return param_buffer, master_shard, exp_avg, exp_avg_sq


def make_inputs(case: Case) -> dict[str, object]:
    numel = case["numel"]
    shard = numel // case.world_size
    return {
        # Averaged fp32 main gradients: identical on every rank after the data-parallel reduction.
        "grad": case.randn(numel, stream="grad", shared=True, dtype=torch.float32, std=1e-2),
        "master_shard": case.randn(shard, stream="master", dtype=torch.float32, std=2e-2),
        "exp_avg": case.randn(shard, stream="m", dtype=torch.float32, std=1e-3),
        "exp_avg_sq": case.rand(shard, stream="v", dtype=torch.float32, low=1e-6, high=2e-4),
        # The model's flat parameter buffer (bf16 or fp32): stale values, overwritten in place.
        "param_buffer": case.randn(numel, stream="param", dtype=case.dtype, std=2e-2),
        "step": case["step"],
        "lr": 1e-3,
        "weight_decay": 0.1,
    }


def roofline(s: Setting) -> Traffic:
    n, numel = s.world_size, s["numel"]
    shard = numel // n
    param_bytes = numel * s.itemsize
    # Read the grad slice; read and write master, exp_avg, exp_avg_sq; write the whole buffer.
    hbm = 4 * shard + 3 * 2 * 4 * shard + param_bytes
    return Traffic(link_bytes=traffic.all_gather(param_bytes, n), hbm_bytes=hbm,
                   flops=16 * shard)


PROBLEM = Problem(
    id=301,
    slug="zero1-sharded-adam-step",
    title="ZeRO-1 sharded AdamW step + parameter all-gather",
    description=(
        "With ZeRO stage 1 (DeepSpeedZeroOptimizer.step, Megatron-LM's DistributedOptimizer) "
        "every data-parallel rank keeps fp32 master weights and Adam moments for only its 1/N "
        "slice of the flat parameter buffer. After the gradients are reduced, each rank runs "
        "AdamW (bias-corrected, decoupled weight decay) on its slice, casts the result to the "
        "model dtype in its part of the parameter buffer, and an all-gather gives every rank "
        "the full updated weights before the next forward. The gather of the whole model "
        "(hundreds of MiB per bucket) sits between two iterations with nothing else to overlap; "
        "a fast kernel fuses the Adam update with the cast and pushes each updated chunk to the "
        "peers as soon as it is written, instead of a separate optimizer pass and a separate gather."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("DeepSpeed",
                  "deepspeed/runtime/zero/stage_1_and_2.py: DeepSpeedZeroOptimizer.step",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 4096, "step": 7},
           "default": {"numel": 64 * 2**20, "step": 1000}},
    tolerances=tolerances(bfloat16=(1e-6, 1e-2), float32=(1e-6, 1e-5)),
    traffic=roofline,
    may_overwrite=("master_shard", "exp_avg", "exp_avg_sq", "param_buffer"),
)
