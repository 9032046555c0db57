"""2-D tensor-parallel linear layer by SUMMA on a q x q grid (Colossal-AI Linear2D)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances

Q = 2  # SUMMA grid side: each tensor-parallel block has Q * Q ranks


def reference(x_block: torch.Tensor, weight_block: torch.Tensor, *,
              row_group: dist.ProcessGroup, col_group: dist.ProcessGroup) -> torch.Tensor:
    # Rank (i, j) of the grid holds x_block = X[batch block i, :, hidden block j] and
    # weight_block = W[hidden block i, out block j] (W is [hidden, out]); it must produce
    # Y[batch block i, :, out block j] = sum_k X[i, k] @ W[k, j].
    q = dist.get_world_size(row_group)
    i = dist.get_rank(col_group)  # position in the column = row index
    j = dist.get_rank(row_group)  # position in the row = column index
    a_local = x_block.reshape(-1, x_block.shape[-1]).contiguous()
    acc = torch.zeros((a_local.shape[0], weight_block.shape[1]), dtype=torch.float32,
                      device=x_block.device)
    for k in range(q):
        # Step k: rank (i, k) broadcasts its X block along row i, rank (k, j) its W block
        # along column j.
        a = a_local if j == k else torch.empty_like(a_local)
        dist.broadcast(a, src=dist.get_global_rank(row_group, k), group=row_group)
        b = weight_block if i == k else torch.empty_like(weight_block)
        dist.broadcast(b, src=dist.get_global_rank(col_group, k), group=col_group)
        acc += torch.matmul(a, b).float()
    return acc.to(x_block.dtype).reshape(*x_block.shape[:-1], weight_block.shape[1])


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {
        "x_block": case.randn(case["batch"] // Q, case["seq"], case["hidden"] // Q, stream="x"),
        "weight_block": case.randn(case["hidden"] // Q, case["out_features"] // Q, stream="w",
                                   std=case["hidden"] ** -0.5),
    }


def layout(world_size: int) -> GroupLayout:
    # Colossal-AI's 2-D initializer: each block of Q*Q consecutive ranks is one tensor-parallel
    # grid (further blocks are data-parallel replicas); rank = base + Q * row + col, so rows are
    # consecutive ranks and columns are strided by Q.
    rows, cols = [], []
    for base in range(0, world_size, Q * Q):
        rows += [[base + Q * r + c for c in range(Q)] for r in range(Q)]
        cols += [[base + Q * r + c for r in range(Q)] for c in range(Q)]
    return {"row_group": rows, "col_group": cols}


def roofline(s: Setting) -> Traffic:
    e = s.itemsize
    m_local = s["batch"] // Q * s["seq"]
    k_local, n_local = s["hidden"] // Q, s["out_features"] // Q
    a_bytes, b_bytes = m_local * k_local * e, k_local * n_local * e
    # Each rank must receive the Q-1 other X blocks of its row and W blocks of its column.
    link = (Q - 1) * (a_bytes + b_bytes)
    hbm = a_bytes + b_bytes + m_local * n_local * e
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=2 * m_local * s["hidden"] * n_local)


PROBLEM = Problem(
    id=411,
    slug="tp-summa-2d-linear",
    title="2-D tensor parallelism: SUMMA linear layer on a 2 x 2 grid",
    description=(
        "Colossal-AI's 2-D tensor parallelism (Linear2D, built on Matmul_AB_2D) partitions both "
        "the activations and the weight over a q x q grid of ranks, so neither is replicated: "
        "rank (i, j) holds batch block i / hidden block j of the input and hidden block i / "
        "output block j of the weight. The product is computed with SUMMA: in each of q steps the "
        "owner of input block column k broadcasts it along its grid row and the owner of weight "
        "block row k broadcasts it down its grid column, and every rank accumulates one block "
        "GEMM. The broadcasts carry whole activation and weight blocks (tens of MiB) on separate "
        "row and column groups, double-buffered against the GEMMs. A fast kernel replaces the "
        "rooted broadcasts with peer reads of the next block straight from the owner's memory and "
        "overlaps them with the running GEMM."
    ),
    categories=("tensor",),
    source=Source(
        "Colossal-AI",
        "colossalai/legacy/nn/layer/parallel_2d/_operation.py: Matmul_AB_2D.forward "
        "(used by colossalai/legacy/nn/layer/parallel_2d/layers.py: Linear2D)",
        "https://github.com/hpcaitech/ColossalAI"),
    collectives=("broadcast",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 4, "seq": 3, "hidden": 16, "out_features": 12},
           "default": {"batch": 8, "seq": 2048, "hidden": 8192, "out_features": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    world_sizes=(4, 8),
    world_size_note=("SUMMA needs a square grid of q*q ranks; q=2 uses 4 ranks, and 8 ranks are "
                     "two data-parallel replicas of the 2 x 2 grid. 2 ranks cannot form a grid."),
    process_groups=layout,
)
