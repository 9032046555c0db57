"""Makani DistributedInstanceNorm2d: Welford statistics gathered over latitude-band shards."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS = 1e-5


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x: [B, C, H / p, W], a latitude band of the field. Instance norm over the global (H, W)
    # per (sample, channel): local biased variance/mean/count in fp32, all-gathered over the
    # spatial group and merged with Welford's update in rank order.
    world = dist.get_world_size(group)
    b, c, h, w = x.shape
    xf = x.float()
    var, mean = torch.var_mean(xf, dim=(-2, -1), unbiased=False)
    count = torch.full_like(mean, float(h * w))
    stats = torch.stack([var, mean, count], dim=0)  # [3, B, C]
    gathered = torch.empty((world * 3, b, c), dtype=stats.dtype, device=stats.device)
    dist.all_gather_into_tensor(gathered, stats, group=group)
    gathered = gathered.view(world, 3, b, c)
    vars_, means, counts = gathered[:, 0], gathered[:, 1], gathered[:, 2]
    m2s = vars_ * counts
    mean, m2, cnt = means[0], m2s[0], counts[0]
    for i in range(1, world):
        delta = means[i] - mean
        m2 = m2 + m2s[i] + delta ** 2 * cnt * counts[i] / (cnt + counts[i])
        mean = mean + delta * counts[i] / (cnt + counts[i])
        cnt = cnt + counts[i]
    var = (m2 / cnt).to(x.dtype).reshape(b, c, 1, 1)
    mean = mean.to(x.dtype).reshape(b, c, 1, 1)
    # Normalise and apply the affine transform in the activation dtype, as the module does.
    y = (x - mean) / torch.sqrt(var + EPS)
    return weight.reshape(-1, 1, 1) * y + bias.reshape(-1, 1, 1)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, c = case["batch"], case["channels"]
    x = case.randn(b, c, case["h"] // case.world_size, case["w"], stream="x")
    # Per-channel offsets so that the mean matters.
    shift = case.randn(1, c, 1, 1, stream="shift", shared=True, std=2.0)
    return {
        "x": x + shift.to(x.dtype) if not case.is_meta else x,
        "weight": case.randn(c, stream="weight", shared=True, std=0.5),
        "bias": case.randn(c, stream="bias", shared=True, std=0.5),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    b, c, h, w = s["batch"], s["channels"], s["h"], s["w"]
    x_local = b * c * (h // n) * w * s.itemsize
    stats = n * 3 * b * c * 4
    # Read x twice (statistics, normalisation) unless fused; write the output once.
    return Traffic(link_bytes=traffic.all_gather(stats, n), hbm_bytes=3 * x_local,
                   flops=8 * b * c * (h // n) * w)


PROBLEM = Problem(
    id=1209,
    slug="makani-distributed-instance-norm",
    title="Spatially distributed instance norm (Makani DistributedInstanceNorm2d)",
    description=(
        "With spatial model parallelism in Makani (FourCastNet / SFNO), each GPU holds a band "
        "of latitudes, but instance normalisation needs the mean and variance of every channel "
        "over the whole globe. Each rank computes its local fp32 variance, mean and count, the "
        "triples are all-gathered over the spatial group and merged with Welford's parallel "
        "update, and every rank normalises its band. The gather is tiny (a few KiB), so the "
        "cost is its latency plus two passes over a large activation; a fast kernel fuses the "
        "local statistics pass with a one-shot exchange through peer memory and normalises in "
        "the second pass without a separate launch."
    ),
    categories=("spatial",),
    source=Source("Makani", "makani/mpu/layer_norm.py: DistributedInstanceNorm2d._stats_welford",
                  "https://github.com/NVIDIA/makani"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "channels": 4, "h": 16, "w": 8},
           "default": {"batch": 1, "channels": 256, "h": 720, "w": 1440}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("latency",),
)
