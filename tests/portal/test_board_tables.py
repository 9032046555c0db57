"""The leaderboard tables a page shows leave out what is all zeros and say so: by category, one
row per category some model solved (a column pair per model), and per problem, only the
problems some compared model solved. How models are ranked: by fast_1 on GPU, by correctness on
CPU, whose timings are a smoke test."""

from __future__ import annotations

from typing import Any

from portal.leaderboards.metrics import Attempt, score_model
from portal.leaderboards.services import (COUNTED_PER_PROBLEM, ScoredTrack, Track, category_matrix, category_table,
                                          comparison_charts, model_table, per_problem_table, scores)

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


# -- how a board is ranked: by fast_1 on GPU, by correctness on CPU (a smoke test) -----------------

def on(kind: str) -> Any:
    from portal.catalog.models import Hardware

    return Hardware(slug=f"{kind}-board", name=kind, kind=kind, gpus=0 if kind == "cpu" else 4,
                    world_size=2 if kind == "cpu" else 4)


def speed_and_breadth() -> list[Attempt]:
    """``fast`` solved one problem, at 3.81x; ``broad`` solved three, none faster than the
    reference."""
    return [attempt("fast", "a", 3.81), attempt("broad", "a", 0.39), attempt("broad", "b", 0.9),
            attempt("broad", "c", 0.5)]


def test_on_cpu_models_rank_by_problems_solved_not_by_speedup() -> None:
    ranked = scores(Track(on("cpu"), PROBLEMS, speed_and_breadth()))
    assert [s.model for s in ranked] == ["broad", "fast"]
    assert ranked[1].fast_p[1.0] > ranked[0].fast_p[1.0]  # what ranked fast first before


def test_on_gpu_models_still_rank_by_fast_1_then_problems_solved() -> None:
    ranked = scores(Track(on("gpu"), PROBLEMS, speed_and_breadth()))
    assert [s.model for s in ranked] == ["fast", "broad"]


def test_on_cpu_a_tie_in_problems_solved_goes_to_pass_at_1_then_the_name() -> None:
    # lucky needed two tries and was fast the second time; the others were right the first time
    attempts = [attempt("lucky", "a", None), attempt("lucky", "a", 3.8), attempt("z-sure", "a", 0.4),
                attempt("a-sure", "a", 0.3)]
    t = Track(on("cpu"), PROBLEMS, attempts)
    assert [s.model for s in scores(t)] == ["a-sure", "z-sure", "lucky"]
    scored = ScoredTrack(t.hardware, PROBLEMS, {s.model: s for s in scores(t)}, t.top_speedup)
    assert [s.model for s in scored.ranked(["lucky", "z-sure", "nobody"])] == ["z-sure", "lucky", "nobody"]
    assert [s.model for s in scores(Track(on("gpu"), PROBLEMS, attempts))][0] == "lucky"


def test_a_cpu_model_table_marks_the_speed_columns_not_ranked_and_says_how_it_is_ranked() -> None:
    cpu, gpu = (Track(on(kind), PROBLEMS, speed_and_breadth()) for kind in ("cpu", "gpu"))
    table = model_table(cpu, scores(cpu))
    labels = {c.key: c.label for c in table.columns}
    for key in ("fast_1", "fast_0_5", "fast_3", "fast_1_at_1", "geomean_speedup", "mean_roofline_fraction"):
        assert labels[key].endswith(" *"), key
    assert (labels["correct"], labels["pass_at_1"], labels["fast_0"]) == ("Correct", "pass@1", "fast_0")
    keys = [c.key for c in table.columns]
    assert keys.index("pass_at_1") < keys.index("fast_0_5")  # what orders the rows comes first
    assert table.note.startswith("Ranked by problems solved (Correct), then pass@1")
    assert "ranked by correctness" in table.title
    assert [r["model"] for r in table.rows] == ["broad", "fast"]
    on_gpu = model_table(gpu, scores(gpu))
    assert not any(c.label.endswith(" *") for c in on_gpu.columns)
    assert on_gpu.note.endswith(COUNTED_PER_PROBLEM) and table.note.endswith(COUNTED_PER_PROBLEM)
    assert "* not ranked: CPU smoke test" in table.note
    assert {c.key for c in on_gpu.columns} == set(keys)  # the API's fields are the same on both


def test_the_comparison_charts_say_how_their_board_is_ranked() -> None:
    for kind, how in (("cpu", "correctness"), ("gpu", "fast_1")):
        t = Track(on(kind), PROBLEMS, speed_and_breadth())
        assert comparison_charts(t, scores(t))["ranked_by"] == how
