"""Benchmark metrics over attempts, computed on the fly (definitions: docs/portal.md).

Pure functions over plain data, so they are unit-tested on hand-made attempts. A *problem set*
is every active problem that runs on the hardware; a problem with no attempts counts as
unsolved. Only finished evaluations are attempts: a job the infrastructure lost (status
``failed``) is not held against the model.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

FAST_P = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
KS = (1, 3)


@dataclass(frozen=True)
class Attempt:
    model: str
    problem: str
    correct: bool
    speedup: float | None = None
    roofline_fraction: float | None = None
    failure_class: str = ""
    speedup_low: float | None = None  # the interval's ends (reports of schema 1.3 on), else None
    speedup_high: float | None = None
    submission: int | None = None


@dataclass
class ModelScore:
    model: str
    problems: int
    attempted: int
    attempts: int
    correct: int
    fast_p: dict[float, float]
    pass_at: dict[int, float]
    fast1_at: dict[int, float]
    geomean_speedup: float | None
    mean_roofline_fraction: float | None
    by_category: dict[str, dict[str, float]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    best: dict[str, Attempt] = field(default_factory=dict)
    fastest: dict[str, Attempt] = field(default_factory=dict)  # what fast_p counts, per problem
    point_estimates: int = 0  # solved problems whose fastest attempt has no interval


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k over n attempts with c successes: 1 - C(n-c, k) / C(n, k).

    With fewer than k attempts the estimator is undefined; we report pass@n (any success),
    which can only under-state pass@k.
    """
    if n <= 0:
        return 0.0
    if n < k:
        return 1.0 if c > 0 else 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(by_problem: Mapping[str, Sequence[Attempt]], n_problems: int, k: int,
                   p: float = 0.0) -> float:
    """pass@k (p = 0) or fast_p@k averaged over ``n_problems``; problems absent from
    ``by_problem`` contribute 0. A success is an attempt ``is_fast(attempt, p)``."""
    if n_problems == 0:
        return 0.0
    total = sum(pass_at_k(len(t), sum(is_fast(a, p) for a in t), k) for t in by_problem.values())
    return total / n_problems


def credited_speedup(attempt: Attempt | Any) -> float | None:
    """The speedup fast_p credits: the interval's lower end; the point speedup where a report
    (schema 1.2 or older) has no interval. ``attempt``: an Attempt, or anything with its
    ``speedup`` and ``speedup_low`` (a Submission: the problem boards rank by it too)."""
    return attempt.speedup_low if attempt.speedup_low is not None else attempt.speedup


def is_fast(attempt: Attempt, p: float) -> bool:
    """Correct and faster than p times the reference (p = 0: correct): for p > 0 the interval's
    lower end must be above p; without an interval, the point speedup."""
    if not attempt.correct:
        return False
    if p == 0:
        return True
    credited = credited_speedup(attempt)
    return credited is not None and credited > p


def best_correct(attempts: Iterable[Attempt]) -> Attempt | None:
    """The correct attempt shown, and used for the geo-mean: the highest lower end of its
    interval (its point speedup where it has none), then the highest point. By the point alone a
    lucky wide interval was the one shown, and resubmitting until a run came out lucky raised a
    model's geo-mean and its row on a problem board (red team, 2026-11-28)."""
    correct = [a for a in attempts if a.correct]
    return max(correct, key=lambda a: (credited_speedup(a) or 0.0, a.speedup or 0.0)) if correct else None


def fastest_correct(attempts: Iterable[Attempt]) -> Attempt | None:
    """The correct attempt with the highest credited speedup: the one fast_p counts, so a lucky
    wide interval never hides a narrower one that clears p."""
    correct = [a for a in attempts if a.correct]
    return max(correct, key=lambda a: credited_speedup(a) or 0.0) if correct else None


def fast_p_share(fastest: Mapping[str, Attempt], n_problems: int, p: float) -> float:
    """``fastest``: problem -> the attempt fast_p counts (``fastest_correct``)."""
    if n_problems == 0:
        return 0.0
    return sum(is_fast(a, p) for a in fastest.values()) / n_problems


def geomean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def outcome(attempt: Attempt) -> str:
    return "correct" if attempt.correct else (attempt.failure_class or "unknown")


def score_model(model: str, attempts: Sequence[Attempt],
                problems: Mapping[str, Sequence[str]]) -> ModelScore:
    """``problems``: slug -> categories, the whole problem set of the hardware."""
    by_problem: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        if a.model == model and a.problem in problems:
            by_problem[a.problem].append(a)
    best = {slug: b for slug, tries in by_problem.items() if (b := best_correct(tries))}
    fastest = {slug: f for slug, tries in by_problem.items() if (f := fastest_correct(tries))}
    n = len(problems)

    def mean_at(k: int, p: float) -> float:
        return mean_pass_at_k(by_problem, n, k, p)

    fractions = [b.roofline_fraction for b in best.values() if b.roofline_fraction is not None]
    return ModelScore(
        model=model, problems=n, attempted=len(by_problem),
        attempts=sum(len(t) for t in by_problem.values()), correct=len(best),
        fast_p={p: fast_p_share(fastest, n, p) for p in FAST_P},
        pass_at={k: mean_at(k, 0.0) for k in KS}, fast1_at={k: mean_at(k, 1.0) for k in KS},
        geomean_speedup=geomean([b.speedup for b in best.values() if b.speedup]),
        mean_roofline_fraction=sum(fractions) / len(fractions) if fractions else None,
        by_category=_by_category(fastest, problems),
        failures=dict(Counter(outcome(a) for t in by_problem.values() for a in t)),
        best=best, fastest=fastest,
        point_estimates=sum(f.speedup_low is None for f in fastest.values()),
    )


def _by_category(fastest: Mapping[str, Attempt],
                 problems: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = defaultdict(lambda: {"problems": 0, "correct": 0, "fast_1": 0})
    for slug, categories in problems.items():
        for category in categories:
            row = table[category]
            row["problems"] += 1
            if slug in fastest:
                row["correct"] += 1
                row["fast_1"] += is_fast(fastest[slug], 1.0)
    return {k: dict(v) for k, v in sorted(table.items())}


def fast_p_curve(fastest: Mapping[str, Attempt], n_problems: int,
                 ps: Sequence[float]) -> list[float]:
    return [fast_p_share(fastest, n_problems, p) for p in ps]


def curve_grid(max_speedup: float, step: float = 0.05) -> list[float]:
    top = max(3.0, math.ceil(max_speedup * 1.1 * 2) / 2)
    return [round(i * step, 4) for i in range(int(top / step) + 1)]
