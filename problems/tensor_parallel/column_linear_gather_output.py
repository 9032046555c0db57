"""Column-parallel linear with gather_output: the LM head's vocab-sharded logits all-gathered."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, weight_shard: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x [T, H]: the final hidden states, the same on every TP rank. weight_shard [V/P, H]: this
    # rank's rows of the output embedding. Returns the full logits [T, V] on every rank.
    world = dist.get_world_size(group)
    local = x @ weight_shard.T  # [T, V/P]
    gathered = torch.empty((world,) + tuple(local.shape), dtype=local.dtype, device=local.device)
    dist.all_gather_into_tensor(gathered.view(world * local.shape[0], -1), local, group=group)
    # gather_from_tensor_model_parallel_region concatenates along the last dimension.
    return gathered.permute(1, 0, 2).reshape(local.shape[0], world * local.shape[1])


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    hidden = case["hidden"]
    return {"x": case.randn(case["tokens"], hidden, stream="x", shared=True),
            "weight_shard": case.randn(case["vocab"] // case.world_size, hidden, stream="weight",
                                       std=hidden ** -0.5)}


def roofline(s: Setting) -> Traffic:
    n, t, h, v = s.world_size, s["tokens"], s["hidden"], s["vocab"]
    logits = t * v * s.itemsize
    return Traffic(link_bytes=traffic.all_gather(logits, n),
                   hbm_bytes=(t * h + v // n * h) * s.itemsize + logits,
                   flops=2 * t * h * v / n)


PROBLEM = Problem(
    id=417,
    slug="tp-column-linear-gather-output",
    title="Column-parallel LM head with gathered logits (gather_output)",
    description=(
        "Megatron-LM's output layer is a ColumnParallelLinear without bias whose weight rows "
        "(the vocabulary) are split over the tensor-parallel ranks. When the caller needs full "
        "logits, for sampling at inference or for a loss that is not vocab-parallel, "
        "gather_output=True makes every rank compute its [tokens, vocab/P] slice and "
        "all-gather the slices along the vocabulary (gather_from_tensor_model_parallel_region), "
        "so every rank holds [tokens, vocab]. The gathered logits are large (hundreds of MiB "
        "for a 128K vocabulary) and the gather can only start after the GEMM; a fast version "
        "streams tiles of the GEMM output to the peers as they are produced and writes them "
        "straight into place, with no separate transpose of the gathered buffer."
    ),
    categories=("tensor",),
    source=Source("Megatron-LM", "megatron/core/tensor_parallel/layers.py: "
                  "ColumnParallelLinear.forward (gather_output=True, "
                  "gather_from_tensor_model_parallel_region)", "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 12, "hidden": 32, "vocab": 96},
           "default": {"tokens": 512, "hidden": 4096, "vocab": 131072}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("inference",),
    pkb_ids=(14,),
)
