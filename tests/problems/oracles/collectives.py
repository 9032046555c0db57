"""Oracles for the plain collectives: exact data movement, sums in float32."""

from __future__ import annotations

import torch

from . import WORLD, Inputs, each, xs


def all_reduce(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs)).sum(0)
    return each(lambda r: total)


def all_gather(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: torch.cat(xs(inputs)))


def reduce_scatter(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs)).sum(0)
    return each(lambda r: total.chunk(WORLD)[r])


def all_to_all(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: torch.cat([x.chunk(WORLD)[r] for x in xs(inputs)]))


def broadcast(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: inputs[0]["x"])


def reduce(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs)).sum(0)
    return each(lambda r: total if r == 0 else inputs[r]["x"])


def gather(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: torch.stack(xs(inputs)) if r == 0 else inputs[r]["x"])


def scatter(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: inputs[0]["x"][r])


ORACLES = {
    "all-reduce": (all_reduce, 1e-6), "all-gather": (all_gather, 0.0),
    "reduce-scatter": (reduce_scatter, 1e-6), "all-to-all": (all_to_all, 0.0),
    "broadcast": (broadcast, 0.0), "reduce": (reduce, 1e-6), "gather": (gather, 0.0),
    "scatter": (scatter, 0.0),
}
