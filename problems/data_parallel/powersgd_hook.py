"""PowerSGD DDP communication hook: rank-r compression of gradient matrices with error feedback."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _orthogonalize(x: torch.Tensor) -> torch.Tensor:
    # Orthonormal columns of each matrix in the batch (the hook uses QR for rank > 2 in fp32;
    # the column signs are irrelevant: they cancel in P @ Q^T).
    q, _ = torch.linalg.qr(x)
    return q


def reference(weight_grads: torch.Tensor, bias_grads: torch.Tensor, error_w: torch.Tensor,
              error_b: torch.Tensor, q_memory: torch.Tensor, *, group: dist.ProcessGroup):
    world = dist.get_world_size(group)
    # Error feedback: add what compression lost last step.
    m = weight_grads + error_w
    b = bias_grads + error_b
    # Vectors (biases) are not worth compressing: plain all-reduce, then average.
    b_avg = b.clone()
    dist.all_reduce(b_avg, op=dist.ReduceOp.SUM, group=group)
    b_avg.div_(world)
    # Warm start: re-orthogonalize last step's Q, then one power iteration.
    q = _orthogonalize(q_memory)
    p = torch.bmm(m, q)
    dist.all_reduce(p, op=dist.ReduceOp.SUM, group=group)
    p = _orthogonalize(p)
    q = torch.bmm(m.transpose(1, 2), p)
    dist.all_reduce(q, op=dist.ReduceOp.SUM, group=group)
    q.div_(world)
    approx = torch.bmm(p, q.transpose(1, 2))
    return approx, b_avg, m - approx, b - b_avg


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    layers, rows, cols, rank = case["layers"], case["rows"], case["cols"], case["rank"]
    f32 = torch.float32
    return {
        "weight_grads": case.randn(layers, rows, cols, stream="gw", dtype=f32),
        "bias_grads": case.randn(layers, rows, stream="gb", dtype=f32),
        "error_w": case.randn(layers, rows, cols, stream="ew", dtype=f32, std=0.1),
        "error_b": case.randn(layers, rows, stream="eb", dtype=f32, std=0.1),
        # Q is identical on every rank (it is the previous step's all-reduced Q).
        "q_memory": case.randn(layers, cols, rank, stream="q", dtype=f32, shared=True),
    }


def roofline(s: Setting) -> Traffic:
    n, layers, rows, cols, r = s.world_size, s["layers"], s["rows"], s["cols"], s["rank"]
    w = layers * rows * cols
    pq = layers * (rows + cols) * r
    link = traffic.all_reduce(4 * (pq + layers * rows), n)
    # Read grads and error, write approx and new error (matrices dominate).
    hbm = 4 * (4 * w + 4 * layers * rows + layers * cols * r)
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=6 * w * r + 3 * w)


PROBLEM = Problem(
    id=205,
    slug="powersgd-grad-compression",
    title="PowerSGD low-rank gradient compression hook",
    description=(
        "PyTorch's powerSGD_hook replaces DDP's gradient all-reduce: each weight matrix M "
        "(plus the error left over from last step) is compressed to rank r by one warm-started "
        "power iteration, P = M Q, all-reduce P, orthogonalize it, Q = M^T P, all-reduce Q, and "
        "the averaged gradient is approximated by P Q^T / world; what the approximation misses "
        "becomes the new local error. Bias vectors are all-reduced uncompressed. Only a few MiB "
        "cross the links instead of hundreds, so the step becomes bound by streaming the fp32 "
        "gradient and error matrices through HBM several times and by three dependent "
        "all-reduces; a fast implementation fuses error addition into the first GEMM, the "
        "residual into the last and keeps the tiny collectives off the critical path. fp32, as "
        "the hook uses QR orthogonalization only in fp32."
    ),
    categories=("data",),
    source=Source("PyTorch",
                  "torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py: powerSGD_hook",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"layers": 2, "rows": 24, "cols": 16, "rank": 4},
           "default": {"layers": 8, "rows": 4096, "cols": 4096, "rank": 4}},
    dtypes=(torch.float32,),
    tolerances=tolerances(float32=(1e-4, 1e-3)),
    traffic=roofline,
    tags=("backward",),
)
