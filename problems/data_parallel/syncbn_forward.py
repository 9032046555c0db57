"""SyncBatchNorm forward: per-rank statistics, all-gather of (mean, invstd, count), global normalisation."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS, MOMENTUM = 1e-5, 0.1


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
              running_mean: torch.Tensor, running_var: torch.Tensor, *,
              group: dist.ProcessGroup):
    world = dist.get_world_size(group)
    c = x.shape[1]
    xf = x.float()
    # Local statistics in fp32 (batch_norm_stats): mean and biased-variance inverse std.
    mean = xf.mean(dim=(0, 2, 3))
    var = xf.var(dim=(0, 2, 3), unbiased=False)
    invstd = torch.rsqrt(var + EPS)
    count = torch.full((1,), x.numel() // c, dtype=torch.float32, device=x.device)
    combined = torch.cat([mean, invstd, count])
    gathered = torch.empty(world * (2 * c + 1), dtype=torch.float32, device=x.device)
    dist.all_gather_into_tensor(gathered, combined, group=group)
    gathered = gathered.view(world, 2 * c + 1)
    mean_all, invstd_all, counts = gathered[:, :c], gathered[:, c:2 * c], gathered[:, 2 * c:]
    # batch_norm_gather_stats_with_counts: merge the per-rank (count, mean, var) groups.
    total = counts.sum()
    g_mean = (mean_all * counts).sum(0) / total
    var_all = invstd_all.pow(-2) - EPS
    g_var = ((var_all + (mean_all - g_mean).square()) * counts).sum(0) / total
    g_invstd = torch.rsqrt(g_var + EPS)
    new_rm = running_mean * (1 - MOMENTUM) + g_mean * MOMENTUM
    new_rv = running_var * (1 - MOMENTUM) + g_var * (total / (total - 1)) * MOMENTUM
    # batch_norm_elemt
    scale = (g_invstd * weight).view(1, c, 1, 1)
    shift = (bias - g_mean * g_invstd * weight).view(1, c, 1, 1)
    y = (xf * scale + shift).to(x.dtype)
    return y, new_rm, new_rv


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, c, hw = case["batch"], case["channels"], case["spatial"]
    f32 = torch.float32
    # Activations with a per-rank offset so that merging the statistics matters.
    x = case.randn(n, c, hw, hw, stream="x", dtype=f32) * 1.5 + case.randn(1, c, 1, 1, stream="xo", dtype=f32)
    return {
        "x": x.to(case.dtype),
        "weight": case.rand(c, stream="w", shared=True, dtype=f32, low=0.5, high=1.5),
        "bias": case.randn(c, stream="b", shared=True, dtype=f32, std=0.1),
        "running_mean": case.randn(c, stream="rm", shared=True, dtype=f32, std=0.1),
        "running_var": case.rand(c, stream="rv", shared=True, dtype=f32, low=0.5, high=2.0),
    }


def roofline(s: Setting) -> Traffic:
    n, c, hw = s["batch"], s["channels"], s["spatial"]
    x_bytes = n * c * hw * hw * s.itemsize
    # The statistics pass and the normalisation pass each need x; y is written once.
    return Traffic(link_bytes=traffic.all_gather(s.world_size * (2 * c + 1) * 4, s.world_size),
                   hbm_bytes=3 * x_bytes, flops=5 * n * c * hw * hw)


PROBLEM = Problem(
    id=206,
    slug="syncbn-forward",
    title="SyncBatchNorm forward (all-gather of per-rank statistics)",
    description=(
        "torch.nn.SyncBatchNorm normalises over the global batch of all data-parallel ranks: "
        "each rank computes its per-channel mean and inverse std in fp32, packs them with its "
        "element count into one vector and all-gathers it; the per-rank groups are merged into "
        "the global mean and variance (which also update the running statistics, with Bessel's "
        "correction) and the input is normalised with the affine weight and bias. The exchange "
        "is only a few KiB but it sits between two full passes over a large activation in every "
        "BN layer of a detection/segmentation network, so its latency and the extra passes "
        "dominate; a fast kernel computes the statistics in one pass, exchanges them through "
        "peer memory without a separate collective launch and normalises right after."
    ),
    categories=("data",),
    source=Source("PyTorch", "torch/nn/modules/_functions.py: SyncBatchNorm.forward",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "channels": 8, "spatial": 6},
           "default": {"batch": 32, "channels": 256, "spatial": 56}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
