"""CAGNET 1D-partitioned GCN layer: gather the dense features, local SpMM, then the weight GEMM."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(h_local: torch.Tensor, cols: torch.Tensor, vals: torch.Tensor,
              weight: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # 1D row partition: this rank owns rows [rank * n, (rank + 1) * n) of the normalised
    # adjacency A (ELL layout: cols/vals [n, K], global column ids) and the same rows of H.
    # Z_local = (A_local @ H) @ W needs every rank's H rows.
    world = dist.get_world_size(group)
    n, feat = h_local.shape
    h_full = torch.empty((n * world, feat), dtype=h_local.dtype, device=h_local.device)
    dist.all_gather_into_tensor(h_full, h_local, group=group)
    # Sparse-dense product, fp32 accumulation over the K nonzeros in a fixed order.
    acc = torch.zeros((n, feat), dtype=torch.float32, device=h_local.device)
    for j in range(cols.shape[1]):
        acc += h_full[cols[:, j]].float() * vals[:, j:j + 1].float()
    return acc.to(h_local.dtype) @ weight


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n, k, feat = case["nodes_per_rank"], case["nnz_per_row"], case["feat"]
    n_total = n * case.world_size
    return {
        "h_local": case.randn(n, feat, stream="h"),
        "cols": case.randint(0, n_total, n, k, stream="cols"),
        "vals": case.rand(n, k, stream="vals", high=2.0 / k),
        "weight": case.randn(feat, case["out_feat"], stream="w", shared=True, std=feat ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    n_rank, k, feat, out = s["nodes_per_rank"], s["nnz_per_row"], s["feat"], s["out_feat"]
    full = n_rank * s.world_size * feat * s.itemsize
    # Gathered H written once, the K referenced rows read, A read, W read, Z written.
    hbm = (full + n_rank * k * feat * s.itemsize + n_rank * k * (8 + s.itemsize)
           + feat * out * s.itemsize + n_rank * out * s.itemsize)
    return Traffic(link_bytes=traffic.all_gather(full, s.world_size), hbm_bytes=hbm,
                   flops=2 * n_rank * k * feat + 2 * n_rank * feat * out)


PROBLEM = Problem(
    id=1105,
    slug="cagnet-1d-gcn-spmm",
    title="CAGNET 1D full-graph GCN layer (all-gather + SpMM + GEMM)",
    description=(
        "CAGNET trains full-batch GCNs by partitioning the adjacency matrix and the feature "
        "matrix by rows. A layer computes Z = A H W, and each rank's rows of A reference columns "
        "from every partition, so the 1D algorithm first brings the whole dense H to every rank "
        "(a stage-by-stage broadcast, equivalently an all-gather), then runs the local sparse "
        "product and the small weight GEMM. The gather moves the entire feature matrix each "
        "layer and dominates the step at scale; a fast kernel streams peers' H blocks over "
        "NVLink and consumes each block's nonzeros as it lands, or fetches only the rows the "
        "local nonzeros touch."
    ),
    categories=("graph",),
    source=Source("CAGNET", "cagnet/nn/functional.py: broad_func_oned",
                  "https://github.com/PASSIONLab/CAGNET"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"nodes_per_rank": 32, "nnz_per_row": 4, "feat": 16, "out_feat": 16},
           "default": {"nodes_per_rank": 65536, "nnz_per_row": 16, "feat": 256,
                       "out_feat": 256}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
