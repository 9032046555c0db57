"""Turning per-rank iteration times into one side's timing summary."""

from __future__ import annotations

import statistics
from typing import Sequence


def slowest_rank_per_iteration(per_rank: Sequence[Sequence[float]]) -> list[float]:
    """An iteration takes as long as its slowest rank (ranks started it together)."""
    count = min(len(times) for times in per_rank)
    return [max(times[i] for times in per_rank) for i in range(count)]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(iterations: Sequence[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(iterations),
        "mean_ms": statistics.fmean(iterations),
        "min_ms": min(iterations),
        "p10_ms": percentile(iterations, 0.10),
        "p90_ms": percentile(iterations, 0.90),
        "iterations": len(iterations),
    }
