"""scripts/bench/order_effect.py: the parity medians and the estimator over pairs of rounds."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))

import order_effect  # noqa: E402


def test_an_order_effect_alike_on_both_sides_cancels_over_pairs_but_not_in_the_median():
    # The true ratio is 1; whichever side goes first is 8% slower: even rounds (candidate first)
    # read 1/1.08, odd ones 1.08. One more even round than odd, as a time cap leaves it.
    ratios = [1 / 1.08, 1.08] * 10 + [1 / 1.08]
    assert order_effect.parity_medians(ratios) == (pytest.approx(1 / 1.08), pytest.approx(1.08))
    assert order_effect.paired_speedup(ratios) == pytest.approx(1.0)
    assert order_effect.paired_speedup([1.2]) is None  # no whole pair yet


def test_every_size_of_a_sweep_is_a_row_and_untimed_reports_are_none():
    timing = {"speedup": 1.5, "rounds": [{"ratio": 1.4}, {"ratio": 1.6}]}
    sweep = {"points": [{"message_bytes": 4096, "report": {"timing": timing}},
                        {"message_bytes": 65536, "report": {"timing": None}}]}
    rows = [order_effect.row(label, t) for label, t in order_effect.timed(sweep, "s.json")]
    assert rows == ["| s.json @4096 B | 2 | 1.400 | 1.600 | 1.500 | 1.497 |"]


def test_repeat_compares_the_files_timed_in_both_batches_under_both_estimators(tmp_path):
    def result(key, rounds, speedup):
        timing = {"speedup": speedup, "rounds": [{"ratio": r} for r in rounds]} if rounds else None
        return json.dumps({"key": key, "submission": {"report": {"timing": timing}}})

    first = tmp_path / "first.jsonl"
    second = tmp_path / "second.jsonl"
    first.write_text("\n".join([result("a.py", [1 / 1.08, 1.08], 0.95), result("b.py", [1.2, 1.2], 1.2),
                                result("failed.py", None, None)]))
    second.write_text("\n".join([result("a.py", [1.08, 1 / 1.08, 1.0], 1.0), result("c.py", [1.1, 1.1], 1.1)]))
    rows = order_effect.repeat_rows(order_effect.board_timings(first), order_effect.board_timings(second))
    assert [row[0] for row in rows] == ["a.py"]  # timed in both batches
    key, reported_1, reported_2, paired_1, paired_2 = rows[0]
    assert (reported_1, reported_2) == (0.95, 1.0)
    assert paired_1 == pytest.approx(1.0) and paired_2 == pytest.approx(1.0)  # the order effect cancels
    assert order_effect.spread(0.95, 1.0) == pytest.approx(1.0 / 0.95)
