"""Async-TP matmul followed by a reduce-scatter along the sequence (PyTorch fused_matmul_reduce_scatter)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

SCATTER_DIM = 1  # batch-first activations [batch, seq, hidden]; scatter the sequence


def reference(a: torch.Tensor, b: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # a: [batch, seq, ffn / tp] (this rank's slice of the contraction dimension);
    # b: [ffn / tp, hidden]. Result: reduce_scatter_tensor(a @ b, "sum", scatter_dim=1).
    world = dist.get_world_size(group)
    partial = torch.matmul(a, b)  # [batch, seq, hidden], a partial sum over ranks
    # reduce_scatter_tensor splits dim 0, so bring the sequence to the front first.
    partial_t = partial.movedim(SCATTER_DIM, 0).contiguous()
    out_t = torch.empty((partial_t.shape[0] // world, *partial_t.shape[1:]),
                        dtype=partial.dtype, device=partial.device)
    dist.reduce_scatter_tensor(out_t, partial_t, group=group)
    return out_t.movedim(0, SCATTER_DIM).contiguous()  # [batch, seq / tp, hidden]


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case.world_size
    ffn, hidden = case["ffn"], case["hidden"]
    return {
        "a": case.randn(case["batch"], case["seq"], ffn // n, stream="a"),
        "b": case.randn(ffn // n, hidden, stream="b", std=ffn ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens, ffn_local, hidden = s["batch"] * s["seq"], s["ffn"] // n, s["hidden"]
    partial_bytes = tokens * hidden * e
    hbm = (tokens * ffn_local + ffn_local * hidden) * e + partial_bytes / n
    return Traffic(link_bytes=traffic.reduce_scatter(partial_bytes, n), hbm_bytes=hbm,
                   flops=2 * tokens * ffn_local * hidden)


PROBLEM = Problem(
    id=415,
    slug="tp-fused-matmul-reducescatter",
    title="Async-TP matmul + reduce-scatter along the sequence (fused_matmul_reduce_scatter)",
    description=(
        "The counterpart of fused_all_gather_matmul in PyTorch's asynchronous tensor parallelism: "
        "a row-parallel projection (the SwiGLU down projection or attention output in torchtitan's "
        "batch-first layout) produces [batch, seq, hidden] partial sums that are reduce-scattered "
        "along the sequence (scatter_dim=1) so each rank keeps the summed rows of its sequence "
        "block. The fused CUDA op computes the output in per-destination chunks and exchanges "
        "them through symmetric memory while the next chunk is multiplied, then reduces the "
        "received partials locally. The scatter along a non-leading dimension forces the plain "
        "path to transpose the whole partial; a fast kernel writes its tiles straight into the "
        "owning peer's buffer in the right layout."
    ),
    categories=("tensor", "sequence"),
    source=Source(
        "PyTorch",
        "torch/distributed/_symmetric_memory/__init__.py: _fused_matmul_reduce_scatter "
        "(_fused_matmul_reduce_scatter_fallback)",
        "https://github.com/pytorch/pytorch"),
    collectives=("reduce_scatter",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "seq": 16, "ffn": 64, "hidden": 24},
           "default": {"batch": 2, "seq": 8192, "ffn": 14336, "hidden": 4096}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
