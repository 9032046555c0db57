"""Muon optimizer step, distributed: each rank orthogonalises its share of matrices, then all-gather."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

LR, WEIGHT_DECAY, MOMENTUM = 0.02, 0.01, 0.95
NS_STEPS = 5
NS_COEFFS = (3.4445, -4.7750, 2.0315)


def _newton_schulz5(g: torch.Tensor) -> torch.Tensor:
    """Quintic Newton-Schulz iteration towards the orthogonal polar factor, in bf16."""
    a, b, c = NS_COEFFS
    x = g.bfloat16()
    transposed = g.shape[-2] > g.shape[-1]
    if transposed:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(NS_STEPS):
        aa = x @ x.mT
        bb = b * aa + c * aa @ aa
        x = a * x + bb @ x
    return x.mT if transposed else x


def reference(params: torch.Tensor, grads: torch.Tensor, momentum: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    layers, rows, cols = params.shape
    out = torch.empty_like(params)
    scale = max(1.0, rows / cols) ** 0.5
    # Matrices are handled in rounds of `world`: in round k, rank r updates matrix k*world + r,
    # then the round's matrices are all-gathered into place.
    for base in range(0, layers, world):
        i = base + rank
        buf = momentum[i].lerp(grads[i], 1 - MOMENTUM)
        update = grads[i].lerp(buf, MOMENTUM)  # Nesterov
        ortho = _newton_schulz5(update).to(params.dtype) * scale
        mine = params[i] * (1 - LR * WEIGHT_DECAY) - LR * ortho
        dist.all_gather_into_tensor(out[base:base + world].view(world * rows, cols),
                                    mine.contiguous(), group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    shape = (case["layers"], case["rows"], case["cols"])
    f32 = torch.float32
    # After the DDP gradient all-reduce, params, grads and momentum are replicated.
    return {
        "params": case.randn(*shape, stream="p", shared=True, dtype=f32, std=0.02),
        "grads": case.randn(*shape, stream="g", shared=True, dtype=f32, std=1e-3),
        "momentum": case.randn(*shape, stream="m", shared=True, dtype=f32, std=1e-3),
    }


def roofline(s: Setting) -> Traffic:
    n, layers, rows, cols = s.world_size, s["layers"], s["rows"], s["cols"]
    mat = rows * cols
    mine = -(-layers // n)
    small, big = min(rows, cols), max(rows, cols)
    ns = NS_STEPS * (2 * small * small * big + 2 * small ** 3 + 2 * small * small * big)
    return Traffic(link_bytes=traffic.all_gather(layers * mat * 4, n),
                   hbm_bytes=mine * 3 * mat * 4 + layers * mat * 4,
                   flops=mine * (ns + 8 * mat))


PROBLEM = Problem(
    id=1308,
    slug="muon-distributed-step",
    title="Distributed Muon optimizer step (Newton-Schulz orthogonalisation + all-gather)",
    description=(
        "Muon replaces Adam for hidden-layer matrices: the Nesterov momentum of the gradient is "
        "orthogonalised by five quintic Newton-Schulz iterations in bf16 and applied with "
        "decoupled weight decay. The iterations are GEMM-heavy, so the distributed version "
        "spreads the matrices over the data-parallel ranks: in rounds of world-size matrices, "
        "rank r updates matrix k*world + r and the round's updated matrices are all-gathered "
        "so every rank holds all new parameters. The reference serialises each round's "
        "all-gather behind its Newton-Schulz GEMMs; a fast implementation overlaps the gather "
        "of one round with the next round's iterations (or pushes each finished matrix to the "
        "peers as soon as it is ready) and fuses the momentum, scaling and decay. Parameters, "
        "gradients and momentum are fp32 (optimizer state), the iteration is bf16 as in Muon."
    ),
    categories=("other",),
    source=Source("Muon", "muon.py: Muon.step", "https://github.com/KellerJordan/Muon"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"layers": 8, "rows": 24, "cols": 16},
           "default": {"layers": 8, "rows": 2048, "cols": 4096}},
    dtypes=(torch.float32,),
    tolerances=tolerances(float32=(5e-5, 1e-3)),
    traffic=roofline,
)
