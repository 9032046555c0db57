"""The leaderboard metrics on hand-made attempts (definitions: docs/portal.md)."""

from __future__ import annotations

import math

import pytest

from portal.leaderboards.metrics import (Attempt, curve_grid, fast_p_share, geomean, is_fast,
                                         pass_at_k, score_model)

PROBLEMS = {"a": ["collective"], "b": ["tensor", "sequence"], "c": ["expert"], "d": ["tensor"]}


def attempt(problem: str, correct: bool, speedup: float | None = None, failure: str = "",
            model: str = "m", fraction: float | None = None) -> Attempt:
    return Attempt(model=model, problem=problem, correct=correct, speedup=speedup,
                   roofline_fraction=fraction, failure_class=failure)


def test_pass_at_k_matches_the_unbiased_estimator() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - math.comb(3, 3) / math.comb(5, 3))
    assert pass_at_k(3, 0, 3) == 0.0
    assert pass_at_k(4, 2, 3) == 1.0  # fewer than k failures: every k-subset has a success


def test_pass_at_k_with_fewer_attempts_than_k_is_any_success() -> None:
    assert pass_at_k(2, 1, 3) == 1.0
    assert pass_at_k(2, 0, 3) == 0.0
    assert pass_at_k(0, 0, 1) == 0.0


def test_fast_p_counts_all_problems_in_the_denominator() -> None:
    best = {"a": attempt("a", True, 2.5), "b": attempt("b", True, 0.8)}
    assert fast_p_share(best, 4, 0.0) == 0.5
    assert fast_p_share(best, 4, 1.0) == 0.25
    assert fast_p_share(best, 4, 2.5) == 0.0  # strictly faster than p


def test_score_uses_the_best_correct_attempt_per_problem() -> None:
    attempts = [
        attempt("a", True, 1.5, fraction=0.4), attempt("a", True, 3.2, fraction=0.8),
        attempt("a", False, failure="deadlock"),
        attempt("b", False, failure="value_mismatch"), attempt("b", True, 0.5, fraction=0.1),
        attempt("c", False, failure="syntax_error"),
        attempt("a", True, 10.0, model="other"),
    ]
    s = score_model("m", attempts, PROBLEMS)
    assert (s.problems, s.attempted, s.attempts, s.correct) == (4, 3, 6, 2)
    assert s.fast_p[0.0] == 0.5
    assert s.fast_p[1.0] == 0.25
    assert s.fast_p[3.0] == 0.25
    assert s.geomean_speedup == pytest.approx(math.sqrt(3.2 * 0.5))
    assert s.mean_roofline_fraction == pytest.approx((0.8 + 0.1) / 2)
    assert s.failures == {"correct": 3, "deadlock": 1, "value_mismatch": 1, "syntax_error": 1}
    # pass@1 per problem: a 2/3, b 1/2, c 0, d (no attempt) 0 -> mean over 4
    assert s.pass_at[1] == pytest.approx((2 / 3 + 1 / 2) / 4)
    assert s.pass_at[3] == pytest.approx((1 + 1 + 0) / 4)  # b: n=2<k, any success
    # fast_1@1: a has 2 of 3 attempts faster than 1x; b none
    assert s.fast1_at[1] == pytest.approx((2 / 3) / 4)


def test_categories_count_each_problem_in_every_category_it_has() -> None:
    s = score_model("m", [attempt("b", True, 2.0), attempt("d", True, 0.9)], PROBLEMS)
    assert s.by_category["tensor"] == {"problems": 2, "correct": 2, "fast_1": 1}
    assert s.by_category["sequence"] == {"problems": 1, "correct": 1, "fast_1": 1}
    assert s.by_category["expert"] == {"problems": 1, "correct": 0, "fast_1": 0}


def test_a_model_with_no_attempts_scores_zero() -> None:
    s = score_model("nobody", [], PROBLEMS)
    assert s.correct == 0 and s.fast_p[0.0] == 0.0 and s.geomean_speedup is None


def test_attempts_on_problems_outside_the_set_are_ignored() -> None:
    s = score_model("m", [attempt("zz", True, 5.0)], PROBLEMS)
    assert s.attempts == 0 and s.correct == 0


def test_geomean_skips_missing_speedups() -> None:
    assert geomean([]) is None
    assert geomean([4.0, 1.0]) == pytest.approx(2.0)


def test_curve_grid_reaches_past_the_best_speedup() -> None:
    grid = curve_grid(7.3)
    assert grid[0] == 0.0 and grid[-1] >= 7.3


def ranged(problem: str, speedup: float, low: float | None, high: float | None,
           model: str = "m") -> Attempt:
    return Attempt(model=model, problem=problem, correct=True, speedup=speedup, speedup_low=low,
                   speedup_high=high)


def test_a_result_whose_interval_reaches_below_p_is_not_faster_than_p() -> None:
    a = ranged("a", 1.05, 0.97, 1.12)
    assert not is_fast(a, 1.0)
    assert is_fast(a, 0.5) and is_fast(a, 0.0)


def test_a_result_whose_interval_lies_above_p_is_faster_than_p() -> None:
    assert is_fast(ranged("a", 1.05, 1.01, 1.09), 1.0)


def test_a_result_without_an_interval_counts_by_its_point_speedup() -> None:
    assert is_fast(ranged("a", 1.05, None, None), 1.0)
    assert not is_fast(ranged("a", 0.98, None, None), 1.0)


def test_an_incorrect_result_is_never_fast_whatever_its_interval() -> None:
    wrong = Attempt(model="m", problem="a", correct=False, speedup=3.0, speedup_low=2.5, speedup_high=3.5)
    assert not is_fast(wrong, 0.0) and not is_fast(wrong, 1.0)


def test_the_attempt_shown_and_counted_has_the_highest_lower_end_not_the_highest_point() -> None:
    lucky, steady = ranged("a", 1.3, 0.9, 1.7), ranged("a", 1.2, 1.1, 1.3)
    s = score_model("m", [lucky, steady], PROBLEMS)
    assert s.best["a"] is steady and s.fastest["a"] is steady  # shown 1.2 [1.1, 1.3], fast_1 counts 1.1
    assert s.fast_p[1.0] == 0.25 and s.by_category["collective"]["fast_1"] == 1
    assert s.geomean_speedup == pytest.approx(1.2)  # a lucky 1.3 [0.9, 1.7] raised it before


def test_the_score_says_how_many_solved_problems_rest_on_a_point_estimate() -> None:
    s = score_model("m", [ranged("a", 1.2, 1.1, 1.3), ranged("b", 1.4, None, None),
                          attempt("c", False, failure="deadlock")], PROBLEMS)
    assert (s.correct, s.point_estimates) == (2, 1)
    assert s.fast_p[1.0] == 0.5


def test_fast_1_at_k_uses_the_lower_end_of_each_attempt() -> None:
    s = score_model("m", [ranged("a", 1.05, 0.97, 1.12), ranged("a", 1.05, 1.01, 1.09)], PROBLEMS)
    assert s.fast1_at[1] == pytest.approx((1 / 2) / 4)
