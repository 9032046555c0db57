"""Async-TP all-gather along the sequence feeding several matmuls (PyTorch fused_all_gather_matmul)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

GATHER_DIM = 1  # batch-first activations [batch, seq, hidden], sharded along the sequence


def reference(a_shard: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # a_shard: [batch, seq / tp, hidden]; b_gate, b_up: [hidden, ffn / tp] (B is K x N here,
    # as in torch.ops.symm_mem.fused_all_gather_matmul, which returns (A, [A @ B for B in Bs])).
    world = dist.get_world_size(group)
    # all_gather_into_tensor concatenates along dim 0, so gather with the sequence leading.
    shard_t = a_shard.movedim(GATHER_DIM, 0).contiguous()
    gathered = torch.empty((shard_t.shape[0] * world, *shard_t.shape[1:]),
                           dtype=a_shard.dtype, device=a_shard.device)
    dist.all_gather_into_tensor(gathered, shard_t, group=group)
    a_full = gathered.movedim(0, GATHER_DIM).contiguous()  # [batch, seq, hidden]
    return a_full, torch.matmul(a_full, b_gate), torch.matmul(a_full, b_up)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case.world_size
    hidden, ffn_local = case["hidden"], case["ffn"] // n
    return {
        "a_shard": case.randn(case["batch"], case["seq"] // n, hidden, stream="a"),
        "b_gate": case.randn(hidden, ffn_local, stream="b1", std=hidden ** -0.5),
        "b_up": case.randn(hidden, ffn_local, stream="b3", std=hidden ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    tokens, hidden, ffn_local = s["batch"] * s["seq"], s["hidden"], s["ffn"] // n
    a_bytes = tokens * hidden * e
    hbm = a_bytes / n + 2 * hidden * ffn_local * e + a_bytes + 2 * tokens * ffn_local * e
    return Traffic(link_bytes=traffic.all_gather(a_bytes, n), hbm_bytes=hbm,
                   flops=2 * 2 * tokens * hidden * ffn_local)


PROBLEM = Problem(
    id=414,
    slug="tp-fused-allgather-matmul",
    title="Async-TP all-gather + multi-matmul (fused_all_gather_matmul, gather along the sequence)",
    description=(
        "PyTorch's asynchronous tensor parallelism (torch.distributed._symmetric_memory, enabled "
        "in torchtitan through the inductor micro-pipeline pass) rewrites an all-gather followed by "
        "the matmuls that consume it into fused_all_gather_matmul(A_shard, Bs, gather_dim): the "
        "activation shard, here batch-first [batch, seq/tp, hidden] split along the sequence, is "
        "gathered and multiplied by every B (the SwiGLU gate and up projections), and the "
        "gathered A is returned too because the backward needs it. The reference runs one NCCL "
        "all-gather, then the GEMMs. The fused CUDA path copies peers' shards through symmetric "
        "memory with the copy engines and multiplies each shard as soon as it lands, so the "
        "gather hides behind the GEMMs; a faster kernel also avoids the transposes that a "
        "gather along a non-leading dimension costs."
    ),
    categories=("tensor", "sequence"),
    source=Source(
        "PyTorch",
        "torch/distributed/_symmetric_memory/__init__.py: _fused_all_gather_matmul "
        "(_fused_all_gather_matmul_fallback)",
        "https://github.com/pytorch/pytorch"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "seq": 16, "hidden": 32, "ffn": 48},
           "default": {"batch": 2, "seq": 8192, "hidden": 4096, "ffn": 14336}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
