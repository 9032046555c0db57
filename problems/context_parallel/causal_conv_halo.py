"""Short causal depthwise conv1d under context parallelism: W-1 token halo from rank-1."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *,
              cp_group: dist.ProcessGroup) -> torch.Tensor:
    """x: [B, T, D] this rank's contiguous tokens; weight: [D, W]; bias: [D].

    y[t] = silu(bias + sum_j weight[:, j] * x[t - (W-1) + j]), where positions before the
    rank's first token come from the previous rank's last W-1 tokens (zeros on rank 0).
    Returns y [B, T, D] in x.dtype.
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    b, t, d = x.shape
    w = weight.shape[1]
    halo = torch.zeros((b, w - 1, d), dtype=x.dtype, device=x.device)
    ops = []
    if rank + 1 < world:
        ops.append(dist.P2POp(dist.isend, x[:, t - (w - 1):].contiguous(),
                              dist.get_global_rank(cp_group, rank + 1), group=cp_group))
    if rank > 0:
        ops.append(dist.P2POp(dist.irecv, halo, dist.get_global_rank(cp_group, rank - 1),
                              group=cp_group))
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    xx = torch.cat([halo, x], dim=1).float()
    wf = weight.float()
    acc = bias.float().expand(b, t, d).clone()
    for j in range(w):
        acc += xx[:, j:j + t] * wf[:, j]
    return F.silu(acc).to(x.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, t, d, w = case["batch"], case["tokens_per_rank"], case["dim"], case["width"]
    return {"x": case.randn(b, t, d, stream="x"),
            "weight": case.randn(d, w, stream="w", shared=True, std=w ** -0.5),
            "bias": case.randn(d, stream="bias", shared=True, std=0.1)}


def roofline(s: Setting) -> Traffic:
    b, t, d, w = s["batch"], s["tokens_per_rank"], s["dim"], s["width"]
    x_bytes = b * t * d * s.itemsize
    halo = b * (w - 1) * d * s.itemsize
    return Traffic(link_bytes=traffic.send_recv(halo),
                   hbm_bytes=2 * x_bytes + d * (w + 1) * s.itemsize,
                   flops=2 * b * t * d * w + 4 * b * t * d)


PROBLEM = Problem(
    id=706,
    slug="cp-causal-conv1d-halo",
    title="Context-parallel short causal conv1d with a (W-1)-token halo exchange",
    description=(
        "Mamba, gated DeltaNet and Hyena layers apply a short causal depthwise convolution "
        "(width 4) before the sequence mixer. With the sequence split across context-parallel "
        "ranks, each rank needs the previous rank's last W-1 tokens as the convolution's initial "
        "state: FLA's causal_conv1d with a CP context sends them to the next rank and Savanna "
        "(Evo 2) does the same for its Hyena short convs. The halo is a few KiB, so the exchange "
        "is pure latency in front of a memory-bound kernel over 256 MiB of activations; a fast "
        "version writes the halo straight into the neighbour's buffer, convolves the interior "
        "while it travels, and patches the first W-1 outputs last."
    ),
    categories=("context",),
    source=Source("flash-linear-attention",
                  "fla/modules/convolution.py: causal_conv1d with cp_context "
                  "(fla/ops/cp: conv_cp_send_recv_fwd)",
                  "https://github.com/fla-org/flash-linear-attention"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "tokens_per_rank": 16, "dim": 32, "width": 4},
           "default": {"batch": 1, "tokens_per_rank": 32768, "dim": 4096, "width": 4}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
