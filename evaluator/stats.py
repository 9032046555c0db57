"""Turning per-rank iteration times into one side's timing summary, and rounds into an interval."""

from __future__ import annotations

import statistics
from typing import Sequence

import torch


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


def median_interval(values: Sequence[float], *, level: float = 0.95, resamples: int = 2000,
                    seed: int = 0) -> tuple[float, float]:
    """Bootstrap percentile interval of the median of ``values``.

    Seeded, so that the same values always give the same interval (a report can be re-derived
    from its rounds). With fewer than two values there is no spread to resample: the interval
    is the value itself. Below ``config.MIN_INTERVAL_ROUNDS`` values the result is not a 95%
    interval whatever it spans; readers of a report say so rather than print it.
    """
    if not values:
        raise ValueError("no values")
    if len(values) < 2:
        return values[0], values[0]
    data = torch.tensor(list(values), dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(len(values), (resamples, len(values)), generator=generator)
    medians = data[picks].sort(dim=1).values
    n = len(values)
    # The median of an even count is the mean of the two middle values, as statistics.median.
    middle = (medians[:, (n - 1) // 2] + medians[:, n // 2]) / 2
    tail = (1 - level) / 2
    low, high = torch.quantile(middle, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return low, high
