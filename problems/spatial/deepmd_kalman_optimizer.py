"""DeePMD-kit's layer-wise Kalman filter (LKF) optimizer step, its blocks spread over ranks."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

KALMAN_NUE = 0.9987  # DeePMD's default forgetting-factor schedule


def reference(H: torch.Tensor, P: torch.Tensor, weights: torch.Tensor, error: torch.Tensor,
              kalman_lambda: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # This rank owns `nb` weight blocks of `b` parameters: H [nb, b] is the gradient of the
    # prediction with respect to them, P [nb, b, b] their error covariance, weights [nb, b].
    # error [1] and kalman_lambda [1] are the same on every rank.
    # Returns every rank's updated blocks [world * nb, b], this rank's new P, and the next lambda.
    world = dist.get_world_size(group)
    lam = kalman_lambda
    K = torch.bmm(P, H.unsqueeze(-1)).squeeze(-1)  # P H, [nb, b]
    # The innovation's scalar denominator sums over every block of the model, on every rank.
    tmp = (lam + (H * K).sum(dim=1)).sum().reshape(1)
    dist.all_reduce(tmp, group=group)
    A = 1.0 / tmp
    new_weights = weights + (A * error) * K
    new_P = (P - A * K.unsqueeze(-1) * K.unsqueeze(-2)) / lam
    # Every rank needs the whole updated model for the next forward.
    gathered = torch.empty((world * weights.shape[0], weights.shape[1]), dtype=weights.dtype,
                           device=weights.device)
    dist.all_gather_into_tensor(gathered, new_weights.contiguous(), group=group)
    next_lambda = KALMAN_NUE * lam + (1.0 - KALMAN_NUE)
    return gathered, new_P, next_lambda


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    nb, b, r = case["blocks"], case["block_size"], case["rank_p"]
    # A covariance must be symmetric positive definite: identity plus a random low-rank term.
    factor = case.randn(nb, b, r, stream="P_factor", std=r ** -0.5)
    P = torch.eye(b, dtype=case.dtype, device=factor.device) + factor @ factor.transpose(1, 2)
    return {"H": case.randn(nb, b, stream="H", std=b ** -0.5),
            "P": P,
            "weights": case.randn(nb, b, stream="weights"),
            "error": case.randn(1, stream="error", shared=True),
            "kalman_lambda": case.rand(1, stream="lambda", shared=True, low=0.98, high=0.999)}


def roofline(s: Setting) -> Traffic:
    n, nb, b, item = s.world_size, s["blocks"], s["block_size"], s.itemsize
    gathered = n * nb * b * item
    return Traffic(link_bytes=traffic.all_gather(gathered, n) + traffic.all_reduce(item, n),
                   # read P and write the new P; H, weights and the gathered model once
                   hbm_bytes=2 * nb * b * b * item + 2 * nb * b * item + gathered,
                   flops=2 * nb * b * b + 3 * nb * b * b)


PROBLEM = Problem(
    id=1210,
    slug="deepmd-kalman-optimizer-step",
    title="DeePMD-kit layer-wise Kalman filter optimizer step",
    description=(
        "DeePMD-kit can train its neural-network force fields with LKFOptimizer, a layer-wise "
        "extended Kalman filter that converges in far fewer steps than Adam: the weights are "
        "cut into blocks of a few thousand parameters, each with a dense error covariance P. "
        "In distributed training the blocks are divided among ranks; every update needs the "
        "scalar innovation 1 / sum over all blocks of (lambda + H^T P H), so the ranks "
        "all-reduce that sum, each applies the Kalman gain K = P H to its own weights and does "
        "the rank-one covariance update P = (P - A K K^T) / lambda, and an all-gather gives "
        "every rank the whole updated model. The step is dominated by streaming the "
        "covariance blocks through memory, with a scalar all-reduce in the middle that every "
        "rank waits on, and a small gather at the end."
    ),
    categories=("spatial", "other"),
    source=Source("DeePMD-kit", "deepmd/pt/optimizer/LKF.py: LKFOptimizer.__update",
                  "https://github.com/deepmodeling/deepmd-kit"),
    collectives=("all_reduce", "all_gather"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"blocks": 2, "block_size": 24, "rank_p": 4},
           "default": {"blocks": 2, "block_size": 4096, "rank_p": 16}},
    tolerances=tolerances(float32=(1e-5, 1e-5), bfloat16=(2e-2, 2e-2)),
    traffic=roofline,
    dtypes=(torch.float32, torch.bfloat16),
    may_overwrite=("P", "weights"),
    tags=("optimizer", "scientific"),
    pkb_ids=(63,),
)
