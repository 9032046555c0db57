"""The portal's reader of evaluator reports tolerates every schema it stores: 1.0 to 1.2 have no
interval, rounds, stop or clocks in ``timing``; 1.3 has them."""

from __future__ import annotations

from typing import Any

import pytest

from portal.lib import reports

from .conftest import one_round, with_interval


def test_a_report_before_1_3_has_no_interval_and_summarizes_as_before(real_report: dict[str, Any]) -> None:
    summary = reports.summarize(real_report)
    assert summary.speedup == pytest.approx(real_report["timing"]["speedup"])
    assert (summary.speedup_low, summary.speedup_high, summary.stop_reason, summary.clocks_moved) == \
        (None, None, "", False)
    assert reports.interval(real_report) is None and reports.rounds(real_report) == []


def test_a_1_3_report_gives_its_interval_rounds_and_stop_reason(interval_report: dict[str, Any]) -> None:
    summary = reports.summarize(interval_report)
    assert (summary.speedup_low, summary.speedup_high, summary.stop_reason) == (1.17, 1.21, "converged")
    span = reports.interval(interval_report)
    assert span is not None and (span.level, span.rounds, span.seconds) == (0.95, 6, 3.1)
    assert [r["ratio"] for r in reports.rounds(interval_report)][0] == pytest.approx(0.298 / 0.251)


def test_the_interval_note_says_level_method_rounds_and_why_timing_stopped(interval_report: dict[str, Any]) -> None:
    note = reports.interval(interval_report).note  # type: ignore[union-attr]
    assert note.startswith("95% interval 1.170-1.210 (bootstrap percentile interval")
    assert "over 6 alternating rounds; stopped after 3.1 s: the interval converged" in note
    assert "faster than p only for p < 1.170" in note


def test_a_failed_report_without_timing_has_no_interval(real_report: dict[str, Any]) -> None:
    failed = {**real_report, "verdict": "fail", "timing": None}
    assert reports.interval(failed) is None and reports.rounds(failed) == []
    assert reports.summarize(failed).speedup_low is None


def test_an_interval_without_both_ends_counts_as_none(interval_report: dict[str, Any]) -> None:
    half = {**interval_report, "timing": {**interval_report["timing"], "interval": {"low": 1.1}}}
    assert reports.interval(half) is None and reports.summarize(half).speedup_high is None


def test_the_round_count_comes_from_the_rounds_when_stop_does_not_say(interval_report: dict[str, Any]) -> None:
    timing = {**interval_report["timing"], "stop": None}
    span = reports.interval({**interval_report, "timing": timing})
    assert span is not None and span.rounds == 6 and span.stop_reason == "" and "stopped" not in span.note


@pytest.mark.parametrize("moved, says", [(None, False), (False, False), (True, True)])
def test_only_an_explicit_true_means_the_clocks_moved(real_report: dict[str, Any], moved: bool | None,
                                                      says: bool) -> None:
    assert reports.clocks_moved(with_interval(real_report, moved=moved)) is says
    assert reports.summarize(with_interval(real_report, moved=moved)).clocks_moved is says


def test_one_round_is_not_an_interval_and_its_note_says_so(real_report: dict[str, Any]) -> None:
    span = reports.interval(one_round(real_report))
    assert span is not None and span.rounds == 1 and span.too_few_rounds
    assert span.note.startswith("No interval: timed over 1 alternating round, fewer than the 6 a 95% "
                                "interval needs.")
    assert not reports.interval(with_interval(real_report)).too_few_rounds  # type: ignore[union-attr]
