"""Oracles for fused problems: the dense layer each one shards, in float64."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import WORLD, Inputs, each, xs


def allgather_gemm(inputs: Inputs) -> list[list[torch.Tensor]]:
    x_full = torch.cat(xs(inputs, "x_shard"))
    return each(lambda r: x_full.double() @ inputs[r]["weight_shard"].double().t())


def gemm_reducescatter(inputs: Inputs) -> list[list[torch.Tensor]]:
    # The dense layer: the full input (hidden concatenated) times the full weight.
    x = torch.cat(xs(inputs, "x_parallel"), dim=-1).double()
    w = torch.cat(xs(inputs, "weight_shard"), dim=-1).double()
    y = x @ w.t() + inputs[0]["bias"].double()
    return each(lambda r: y.chunk(WORLD, dim=0)[r])


def rmsnorm(inputs: Inputs) -> list[list[torch.Tensor]]:
    x = torch.cat(xs(inputs, "x_shard"), dim=-1).double()
    w = torch.cat(xs(inputs, "weight_shard")).double()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    return each(lambda r: y.chunk(WORLD, dim=-1)[r])


def vocab_cross_entropy(inputs: Inputs) -> list[list[torch.Tensor]]:
    logits = torch.cat(xs(inputs, "logits"), dim=-1).double()
    loss = F.cross_entropy(logits, inputs[0]["target"], reduction="none")
    return each(lambda r: loss)


def ulysses(inputs: Inputs) -> list[list[torch.Tensor]]:
    full = torch.cat(xs(inputs))  # [seq, batch, heads, dim]
    return each(lambda r: full.chunk(WORLD, dim=2)[r])


ORACLES = {
    "tp-allgather-gemm": (allgather_gemm, 1e-4), "tp-gemm-reducescatter": (gemm_reducescatter, 1e-4),
    "tp-rmsnorm": (rmsnorm, 1e-4), "vocab-parallel-cross-entropy": (vocab_cross_entropy, 1e-4),
    "ulysses-all-to-all": (ulysses, 0.0),
}
