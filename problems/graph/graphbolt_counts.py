"""The per-peer row counts GraphBolt's cooperative exchange uses, shared by its forward and
backward problems. Not a problem itself (no PROBLEM)."""

from __future__ import annotations

import torch

from problems.spec import Case


def split_counts(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-peer row counts that are uneven yet add up to `rows` for every sender and receiver:
    rank i sends parts[(j - i) % world] rows to rank j, a circulant pattern. A rank keeps
    rows // world of its own rows (parts[0]); the rest is cut at random among the peers."""
    world, rows = case.world_size, case["rows"]
    remote = rows - rows // world
    cuts = case.randint(0, remote + 1, world - 2, stream="cuts", shared=True).sort().values
    edges = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), remote)])
    parts = torch.cat([cuts.new_full((1,), rows // world), edges[1:] - edges[:-1]])
    peers = torch.arange(world, device=parts.device)
    return parts[(peers - case.rank) % world], parts[(case.rank - peers) % world]
