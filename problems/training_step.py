"""The model and optimizer shared by the end-to-end training-step problems (DDP, FSDP): a
two-layer ReLU MLP with an MSE loss, its hand-written backward, and AdamW. Not a problem itself
(no PROBLEM); the registry skips it.

The backward is written out rather than taken from autograd so that the reference is plain
tensor math a reader can check, and so that every GEMM a candidate must match is visible.
"""

from __future__ import annotations

import torch

BETA1, BETA2, EPS = 0.9, 0.95, 1e-8
LR, WEIGHT_DECAY = 1e-3, 0.1
# One model for every end-to-end step problem, so that their times compare: small runs on a CPU
# core; default is a 67M-parameter MLP (268 MB of float32 gradients) on 2048 samples per rank.
STEP_SIZES = {"small": {"batch": 8, "d_in": 16, "hidden": 32, "d_out": 8, "step": 3},
              "default": {"batch": 2048, "d_in": 4096, "hidden": 8192, "d_out": 4096, "step": 10}}


def param_shapes(d_in: int, hidden: int, d_out: int) -> list[tuple[int, ...]]:
    return [(hidden, d_in), (hidden,), (d_out, hidden), (d_out,)]


def param_count(d_in: int, hidden: int, d_out: int) -> int:
    return hidden * d_in + hidden + d_out * hidden + d_out


def unflatten(flat: torch.Tensor, d_in: int, hidden: int, d_out: int) -> list[torch.Tensor]:
    out, offset = [], 0
    for shape in param_shapes(d_in, hidden, d_out):
        n = 1
        for size in shape:
            n *= size
        out.append(flat[offset: offset + n].view(shape))
        offset += n
    return out


def mlp_grads(x: torch.Tensor, y: torch.Tensor, flat: torch.Tensor, hidden: int) -> torch.Tensor:
    """Gradient of mean((relu(x W1^T + b1) W2^T + b2 - y)^2) over this rank's batch with respect
    to the flat parameters (same layout and length as ``flat``, padding included)."""
    w1, b1, w2, b2 = unflatten(flat, x.shape[1], hidden, y.shape[1])
    pre = x @ w1.T + b1
    h = pre.clamp_min(0)
    out = h @ w2.T + b2
    d_out = (out - y) * (2.0 / out.numel())
    d_h = (d_out @ w2) * (pre > 0)
    grads = [d_h.T @ x, d_h.sum(0), d_out.T @ h, d_out.sum(0)]
    flat_grad = torch.zeros_like(flat)
    used = sum(g.numel() for g in grads)
    flat_grad[:used] = torch.cat([g.reshape(-1) for g in grads])
    return flat_grad


def adamw(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
          step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """torch.optim.AdamW's update (decoupled weight decay, bias correction), out of place."""
    m = exp_avg * BETA1 + grad * (1 - BETA1)
    v = exp_avg_sq * BETA2 + grad * grad * (1 - BETA2)
    denom = (v / (1 - BETA2 ** step)).sqrt() + EPS
    new = param * (1 - LR * WEIGHT_DECAY) - LR * (m / (1 - BETA1 ** step)) / denom
    return new, m, v


def step_flops(batch: int, params: int) -> float:
    """Forward and backward GEMMs of the MLP (2 + 4 flops per weight per sample)."""
    return 6.0 * batch * params


def padded_count(d_in: int, hidden: int, d_out: int, world: int) -> int:
    """The flat buffer's length, zero-padded to a multiple of the world size (as FSDP's
    FlatParameter and DeepSpeed's partitioned buffers are)."""
    n = param_count(d_in, hidden, d_out)
    return -(-n // world) * world
