"""evaluator.stats: one side's timing summary from every rank's iteration times."""

from __future__ import annotations

import pytest

from evaluator.stats import percentile, slowest_rank_per_iteration, summarize


def test_an_iteration_takes_as_long_as_its_slowest_rank():
    assert slowest_rank_per_iteration([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]]) == [3.0, 5.0, 2.5]


def test_ranks_with_different_counts_are_cut_to_the_shortest():
    assert slowest_rank_per_iteration([[1.0, 2.0, 3.0], [4.0]]) == [4.0]


def test_summary_statistics():
    summary = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert summary["median_ms"] == 3.0 and summary["min_ms"] == 1.0 and summary["iterations"] == 5
    assert summary["mean_ms"] == 3.0
    assert summary["p10_ms"] == pytest.approx(1.4) and summary["p90_ms"] == pytest.approx(4.6)


def test_percentiles_interpolate_and_refuse_nothing():
    assert percentile([0.0, 10.0], 0.9) == 9.0
    assert percentile([7.0], 0.5) == 7.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)
