"""Domain-decomposed 2D convolution: halo rows exchanged with neighbours, then a local conv."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x: [B, C, H / p, W], split along H in rank order. weight [Cout, C, k, k] (k odd), bias
    # [Cout]. The result equals the rank's rows of conv2d(x_global, padding=k // 2): the first
    # and last rank pad the global edge with zeros, every interior edge takes k // 2 halo rows
    # from the neighbour.
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    halo = weight.shape[-1] // 2
    ops, top, bottom = [], None, None
    if rank > 0:
        up = dist.get_global_rank(group, rank - 1)
        top = x.new_empty((x.shape[0], x.shape[1], halo, x.shape[3]))
        ops += [dist.P2POp(dist.isend, x[:, :, :halo].contiguous(), up, group=group),
                dist.P2POp(dist.irecv, top, up, group=group)]
    if rank < world - 1:
        down = dist.get_global_rank(group, rank + 1)
        bottom = x.new_empty((x.shape[0], x.shape[1], halo, x.shape[3]))
        ops += [dist.P2POp(dist.isend, x[:, :, -halo:].contiguous(), down, group=group),
                dist.P2POp(dist.irecv, bottom, down, group=group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    if top is None:
        top = torch.zeros_like(x[:, :, :halo])
    if bottom is None:
        bottom = torch.zeros_like(x[:, :, -halo:])
    padded = torch.cat([top, x, bottom], dim=2)
    return F.conv2d(padded, weight, bias, padding=(0, halo))


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    c, cout, k = case["channels"], case["out_channels"], case["kernel"]
    return {
        "x": case.randn(case["batch"], c, case["h"] // case.world_size, case["w"], stream="x"),
        "weight": case.randn(cout, c, k, k, stream="weight", shared=True,
                             std=(c * k * k) ** -0.5),
        "bias": case.randn(cout, stream="bias", shared=True, std=0.1),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    b, c, cout, h, w, k = (s["batch"], s["channels"], s["out_channels"], s["h"], s["w"],
                           s["kernel"])
    halo_bytes = b * c * (k // 2) * w * s.itemsize
    # An interior rank sends two halos and receives two (each direction on its own link pair).
    link = 2 * halo_bytes if n > 2 else halo_bytes
    x_local = b * c * (h // n) * w * s.itemsize
    out = b * cout * (h // n) * w * s.itemsize
    hbm = x_local + 2 * halo_bytes + cout * c * k * k * s.itemsize + out
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=2 * b * cout * c * k * k * (h // n) * w)


PROBLEM = Problem(
    id=1203,
    slug="halo-exchange-conv2d",
    title="Spatially sharded 2D convolution with halo exchange (PhysicsNeMo ShardTensor)",
    description=(
        "PhysicsNeMo's ShardTensor lets a CNN run on an image or field too large for one GPU by "
        "splitting it along height: before each convolution every rank trades its boundary rows "
        "with the ranks above and below (halo padding), pads the global edges with zeros and "
        "convolves its local slab. The halos are small compared to the slab, so the exchange is "
        "latency-bound and stalls every conv layer; a fast kernel computes the interior rows "
        "while the halos are in flight and finishes the boundary rows once they land, or reads "
        "the neighbour's edge rows directly from its memory."
    ),
    categories=("spatial",),
    source=Source("PhysicsNeMo", "physicsnemo/distributed/shard_utils/halo.py: halo_padding "
                  "(conv_patches.py: partial_conv_nd)", "https://github.com/NVIDIA/physicsnemo"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "channels": 4, "out_channels": 4, "h": 16, "w": 8, "kernel": 3},
           "default": {"batch": 1, "channels": 64, "out_channels": 64, "h": 2048, "w": 2048,
                       "kernel": 3}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    pkb_ids=(87,),
)
