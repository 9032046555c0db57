"""The roofline traffic of the plain collectives, against an independent count.

The count simulates the bandwidth-optimal algorithms message by message (ring reduce-scatter and
all-gather on n chunks, direct pairwise all-to-all, pipelined chains for rooted collectives) and
takes the busiest rank's larger of bytes sent and received.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

import problems


def _busiest(messages: list[tuple[int, int, float]]) -> float:
    sent: dict[int, float] = defaultdict(float)
    received: dict[int, float] = defaultdict(float)
    for src, dst, nbytes in messages:
        sent[src] += nbytes
        received[dst] += nbytes
    return max(max(sent.values(), default=0), max(received.values(), default=0))


def ring_pass(n: int, chunk: float) -> list[tuple[int, int, float]]:
    """n-1 steps in which every rank forwards one chunk to its right neighbour."""
    return [(r, (r + 1) % n, chunk) for _ in range(n - 1) for r in range(n)]


def simulate(slug: str, n: int, in_bytes: float, out_bytes: float) -> float:
    if slug == "all-reduce":
        return _busiest(ring_pass(n, in_bytes / n) * 2)  # reduce-scatter then all-gather
    if slug == "all-gather":
        return _busiest(ring_pass(n, in_bytes))
    if slug == "reduce-scatter":
        return _busiest(ring_pass(n, in_bytes / n))
    if slug == "all-to-all":
        return _busiest([(r, p, in_bytes / n) for r in range(n) for p in range(n) if p != r])
    if slug in ("broadcast", "reduce"):
        # A chain 0 -> 1 -> ... -> n-1 (reversed for reduce), pipelined in k pieces.
        k = 64
        return _busiest([(r, r + 1, in_bytes / k) for _ in range(k) for r in range(n - 1)])
    if slug == "gather":
        return _busiest([(r, 0, in_bytes) for r in range(1, n)])
    if slug == "scatter":
        return _busiest([(0, r, in_bytes / n) for r in range(1, n)])
    raise KeyError(slug)


def _tensor_bytes(values) -> float:
    return float(sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor)))


@pytest.mark.parametrize("slug", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                  "broadcast", "reduce", "gather", "scatter"])
@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_plain_collective_traffic_matches_an_independent_count(slug, world_size):
    problem = problems.get(slug)
    # The busiest rank of a rooted collective is the root, rank 0.
    case = problem.case(world_size, "default", None, rank=0, seed=0, device="meta")
    in_bytes = _tensor_bytes(problem.make_inputs(case).values())
    expected = simulate(slug, world_size, in_bytes, 0.0)
    got = problem.traffic(problem.setting(world_size, "default")).link_bytes
    assert got == pytest.approx(expected, rel=1e-9), (slug, world_size)
