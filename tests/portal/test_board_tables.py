"""The leaderboard tables a page shows leave out what is all zeros and say so: by category, one
row per category some model solved (a column pair per model), and per problem, only the
problems some compared model solved."""

from __future__ import annotations

from typing import Any

from portal.leaderboards.metrics import Attempt, score_model
from portal.leaderboards.services import category_matrix, category_table, per_problem_table

PROBLEMS = {"a": ["collective"], "b": ["tensor", "sequence"], "c": ["expert"], "d": ["tensor"],
            "e": ["graph"]}


def attempt(model: str, problem: str, speedup: float | None) -> Attempt:
    return Attempt(model=model, problem=problem, correct=speedup is not None, speedup=speedup,
                   roofline_fraction=None, failure_class="" if speedup else "wrong_output")


def ranked() -> list[Any]:
    return [score_model("m1", [attempt("m1", "a", 1.5), attempt("m1", "b", 0.8), attempt("m1", "c", None)], PROBLEMS),
            score_model("m2", [attempt("m2", "b", 1.2)], PROBLEMS)]


def test_by_category_is_a_row_per_solved_category_with_a_column_pair_per_model() -> None:
    table = category_matrix(ranked())
    assert [c.key for c in table.columns] == ["category", "problems", "correct:m1", "fast_1:m1",
                                              "correct:m2", "fast_1:m2"]
    rows = {r["category"]: r for r in table.rows}
    assert sorted(rows) == ["collective", "sequence", "tensor"]
    assert rows["tensor"] == {"category": "tensor", "problems": 2, "correct:m1": 1, "fast_1:m1": 0,
                              "correct:m2": 1, "fast_1:m2": 1}
    assert table.note == "Not shown: 2 categories where no model has a correct solution (expert, graph)."
    # the long form, one row per model and category, is what the API keeps
    assert len(category_table(ranked()).rows) == 2 * 5


class _Track:
    problems = PROBLEMS


def test_per_problem_shows_only_problems_some_model_solved() -> None:
    table = per_problem_table(_Track(), ranked())  # type: ignore[arg-type]
    assert [r["problem"] for r in table.rows] == ["a", "b"]
    assert table.rows[1]["m1"] == 0.8 and table.rows[1]["m2"] == 1.2 and "m2" not in table.rows[0]
    assert table.note == "Not shown: 3 of the 5 problems, which none of these models solved."
