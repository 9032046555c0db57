"""2-D parallelism: a tensor-parallel SwiGLU MLP whose weight shards are further FSDP-sharded."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import groups, traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _layout(world: int) -> dict[str, list[list[int]]]:
    # TorchTitan's 2-D mesh ["dp_shard", "tp"]: TP innermost (consecutive ranks), FSDP strided.
    tp_groups, fsdp_groups = groups.grid(world, groups.half_tp(world))
    return {"tp_group": tp_groups, "fsdp_group": fsdp_groups}


def _unshard(shard: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    # FSDP2 shards every parameter on dim 0; the all-gather restores the TP-local weight.
    full = shard.new_empty((shard.shape[0] * dist.get_world_size(group),) + tuple(shard.shape[1:]))
    dist.all_gather_into_tensor(full, shard.contiguous(), group=group)
    return full


def reference(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor, *,
              tp_group: dist.ProcessGroup, fsdp_group: dist.ProcessGroup) -> torch.Tensor:
    # x [T, D]: this data-parallel rank's tokens (the same on the ranks of a TP group).
    # w1, w3 [F/(tp*fsdp), D]: this rank's FSDP shard of its TP column shard of the gate and up
    # projections; w2 [D/fsdp, F/tp]: its FSDP shard of its TP row shard of the down projection.
    # Returns the MLP output [T, D], summed over TP.
    gate, up, down = (_unshard(w, fsdp_group) for w in (w1, w3, w2))
    hidden = F.silu(x @ gate.T) * (x @ up.T)
    out = hidden @ down.T
    dist.all_reduce(out, group=tp_group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    world = case.world_size
    tp = groups.half_tp(world)
    fsdp = world // tp
    tp_rank, fsdp_rank = case.rank % tp, case.rank // tp
    dim, ffn = case["hidden"], case["ffn"]
    f_tp = ffn // tp
    # The full weights are shared; each rank cuts its TP shard, then its FSDP shard of that.
    w1 = case.randn(ffn, dim, stream="w1", shared=True, std=dim ** -0.5)
    w3 = case.randn(ffn, dim, stream="w3", shared=True, std=dim ** -0.5)
    w2 = case.randn(dim, ffn, stream="w2", shared=True, std=ffn ** -0.5)
    rows = slice(tp_rank * f_tp + fsdp_rank * (f_tp // fsdp),
                 tp_rank * f_tp + (fsdp_rank + 1) * (f_tp // fsdp))
    down_rows = slice(fsdp_rank * (dim // fsdp), (fsdp_rank + 1) * (dim // fsdp))
    return {"x": case.randn(case["tokens"], dim, stream=f"x_dp{fsdp_rank}", shared=True),
            "w1": w1[rows].contiguous(), "w3": w3[rows].contiguous(),
            "w2": w2[down_rows, tp_rank * f_tp:(tp_rank + 1) * f_tp].contiguous()}


def roofline(s: Setting) -> Traffic:
    tp = groups.half_tp(s.world_size)
    fsdp = s.world_size // tp
    t, dim, ffn = s["tokens"], s["hidden"], s["ffn"]
    local_weights = 3 * dim * ffn // tp * s.itemsize
    out = t * dim * s.itemsize
    return Traffic(link_bytes=traffic.all_gather(local_weights, fsdp) + traffic.all_reduce(out, tp),
                   hbm_bytes=local_weights + 2 * out + t * ffn // tp * s.itemsize,
                   flops=2 * t * dim * 3 * ffn // tp)


PROBLEM = Problem(
    id=313,
    slug="fsdp-tp-swiglu-mlp",
    title="FSDP x TP: SwiGLU MLP with FSDP-sharded tensor-parallel weights",
    description=(
        "TorchTitan and Megatron-FSDP train large models on a 2-D mesh: tensor parallelism "
        "inside a node splits each MLP into column-parallel gate/up and row-parallel down "
        "projections, and FSDP across the other dimension shards each of those TP shards "
        "again. Before the MLP's forward, FSDP all-gathers the three weight shards over the "
        "FSDP group; the rank computes silu(x W1^T) * (x W3^T) for its slice of the hidden "
        "dimension, projects back with its W2 shard, and the partial outputs are all-reduced "
        "over TP. The parameter gathers (over the FSDP group) and the activation all-reduce "
        "(over the TP group) use different links; a fast version prefetches and overlaps the "
        "gathers with the first GEMM and fuses the reduction into the last one. On 2 GPUs TP "
        "is 1 and only FSDP remains; on 4 and 8, TP is 2 and 4."
    ),
    categories=("fsdp_zero", "tensor"),
    source=Source("TorchTitan", "torchtitan/models/llama3/infra/parallelize.py: apply_tp and "
                  "apply_fsdp on the ('dp_shard', 'tp') mesh, FeedForward.forward",
                  "https://github.com/pytorch/torchtitan"),
    collectives=("all_gather", "all_reduce"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 8, "hidden": 32, "ffn": 64},
           "default": {"tokens": 4096, "hidden": 4096, "ffn": 14336}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=_layout,
    pkb_ids=(48,),
)
