"""Benchmark metrics over attempts, computed on the fly (definitions: docs/portal.md).

Pure functions over plain data, so they are unit-tested on hand-made attempts. A *problem set*
is every active problem that runs on the hardware; a problem with no attempts counts as
unsolved. Only finished evaluations are attempts: a job the infrastructure lost (status
``failed``) is not held against the model.
"""

from __future__ import annotations

import functools
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

FAST_P = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
KS = (1, 3)

# The 95% intervals over problems (docs/portal.md, "Intervals over problems"). A share of
# problems (every problem scores 0 or 1: fast_p, and pass@k where each problem's attempts agree)
# gets Wilson's score interval; a mean of fractional per-problem estimates (pass@k, fast_1@k with
# mixed attempts) and every paired difference get a percentile bootstrap over the problems, with
# a fixed seed: the same board on every load, on every machine.
LEVEL = 0.95
Z95 = 1.959963984540054  # statistics.NormalDist().inv_cdf(0.975)
RESAMPLES = 2000
SEED = 20261129
WILSON, BOOTSTRAP, EXACT = "wilson", "bootstrap", "exact"


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
    # problem -> (attempts, correct, correct and fast_1): what pass@k and fast_1@k per problem
    # and a paired difference with another model need (attempted problems only)
    tallies: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # metric key (metric_keys()) -> its 95% interval over the problems; filled by
    # score_model(..., intervals=True), empty otherwise
    intervals: dict[str, "Interval"] = field(default_factory=dict)


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
                problems: Mapping[str, Sequence[str]], intervals: bool = False) -> ModelScore:
    """``problems``: slug -> categories, the whole problem set of the hardware. ``intervals``:
    also each metric's 95% interval over the problems (``score_intervals``; a few ms)."""
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
    score = ModelScore(
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
        tallies={slug: (len(t), sum(a.correct for a in t), sum(is_fast(a, 1.0) for a in t))
                 for slug, t in by_problem.items()},
    )
    if intervals:
        score.intervals = score_intervals(score, sorted(problems))
    return score


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


# -- intervals over problems ----------------------------------------------------------------------
#
# Every score above is a mean over the N problems of the set of a per-problem value in [0, 1]:
# fast_p of 0 or 1 (its fastest correct attempt clears p, or not), pass@k and fast_1@k of the
# problem's unbiased estimate (0 for a problem never tried). The sampling error that matters to a
# reader comparing models is that of the problems: another 40 problems like these would give
# another score. The intervals below are over problems, at 95%.


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str  # WILSON or BOOTSTRAP

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Difference:
    """One metric of model a minus the same metric of model b over the same problems, with the
    95% paired bootstrap interval of that difference, and, where both models' per-problem values
    are all 0 or 1 (fast_p always), McNemar's exact p-value, which then decides."""

    metric: str
    a: float
    b: float
    difference: float
    low: float
    high: float
    problems: int
    p_value: float | None = None

    @property
    def method(self) -> str:
        """What decides whether the two differ: the exact test (EXACT) or the interval (BOOTSTRAP)."""
        return EXACT if self.p_value is not None else BOOTSTRAP

    @property
    def distinguishable(self) -> bool:
        """On these problems one model is ahead on this metric: McNemar's exact test rejects at
        5% where there is one; else the interval leaves out 0. The percentile bootstrap is narrow
        when few problems differ: 4 of 40 solved by a alone and none by b left its interval clear
        of 0 where the exact test gives p = 0.125."""
        if self.p_value is not None:
            return self.p_value < 1 - LEVEL
        return not (self.low <= 0.0 <= self.high)


def fast_key(p: float) -> str:
    """The key of fast_p in tables and the API: fast_0, fast_0_5, fast_1, ..."""
    return "fast_" + f"{p:g}".replace(".", "_")


def metric_keys() -> list[str]:
    """Every metric that gets an interval, in the board's order of columns (GPU)."""
    return ([fast_key(p) for p in FAST_P] + [f"pass_at_{k}" for k in KS]
            + [f"fast_1_at_{k}" for k in KS])


def metric_label(key: str) -> str:
    """``fast_0_5`` -> ``fast_0.5``, ``pass_at_3`` -> ``pass@3``, ``fast_1_at_1`` -> ``fast_1@1``."""
    if "_at_" in key:
        head, _, k = key.rpartition("_at_")
        return f"{'pass' if head == 'pass' else 'fast_1'}@{k}"
    return "fast_" + key[len("fast_"):].replace("_", ".")


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval of a share of ``successes`` out of ``n`` (None for n = 0).

    Unlike the normal (Wald) interval it stays inside [0, 1] and does not shrink to a point at
    0 or n: 0 problems solved of 40 is [0, 0.088], not "exactly 0"."""
    if n <= 0:
        return None
    share = successes / n
    zz = z * z
    centre = (share + zz / (2 * n)) / (1 + zz / n)
    half = z / (1 + zz / n) * math.sqrt(share * (1 - share) / n + zz / (4 * n * n))
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return round(low, 9), round(high, 9)


@functools.lru_cache(maxsize=8)
def _resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """How often each of n problems is drawn in each bootstrap resample: ``resamples`` rows of
    counts summing to n. NumPy's legacy RandomState, whose stream is frozen (NEP 19): the same
    draws for a seed on every NumPy version and machine. Cached (2.4 MB for 150 problems): every
    metric, model and pair over n problems uses the same draws. Floats, to multiply as they are."""
    counts = np.random.RandomState(seed).multinomial(n, [1.0 / n] * n, size=resamples).astype(np.float64)
    counts.flags.writeable = False
    return counts


def bootstrap_interval(values: Sequence[float], level: float = LEVEL, resamples: int = RESAMPLES,
                       seed: int = SEED) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values`` (one per problem, in a fixed
    order: the board's is sorted by slug). Deterministic: a fixed seed, ends rounded to 9
    digits (a matrix product may differ in its last bit between machines). None for no values.

    It can never be wider than the values: all equal gives that value as both ends (all solved:
    [1, 1]), which is why a plain share gets Wilson's interval instead (``mean_interval``)."""
    return _bootstrap_columns([values], level, resamples, seed)[0] if len(values) else None


def _bootstrap_columns(columns: Sequence[Sequence[float]], level: float = LEVEL,
                       resamples: int = RESAMPLES, seed: int = SEED) -> list[tuple[float, float]]:
    """``bootstrap_interval`` of each of several columns of values over the same n > 0 problems,
    from one matrix product (a pair's ten metrics at once: five times faster than one by one)."""
    n = len(columns[0])
    means = _resample_counts(n, resamples, seed) @ np.asarray(columns, dtype=float).T / n
    ends = np.quantile(means, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return [(round(float(low), 9), round(float(high), 9)) for low, high in ends.T]


def paired_bootstrap_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL,
                              resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """Bootstrap interval of mean(a) - mean(b) over the same problems (``a[i]`` and ``b[i]`` are
    one problem): each resample draws problems, and both models' values of a drawn problem go
    together, so what the two have in common (a problem both find easy) cancels."""
    if len(a) != len(b):
        raise ValueError(f"paired values of {len(a)} and {len(b)} problems")
    return bootstrap_interval([x - y for x, y in zip(a, b)], level, resamples, seed)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided test of two models on the same problems: of the problems where
    they differ (only one solved it), ``only_a`` went to a and ``only_b`` to b. With no true
    difference each is a coin toss, so the p-value is twice the smaller binomial tail (capped
    at 1); no problem that differs gives 1."""
    m, least = only_a + only_b, min(only_a, only_b)
    if m == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(m, k) for k in range(least + 1)) / 2 ** m)


def _all_zero_or_one(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def mean_interval(values: Sequence[float]) -> Interval | None:
    """The 95% interval of the mean of per-problem ``values`` in [0, 1]: Wilson's where every
    value is 0 or 1 (the mean is a share of problems), else the percentile bootstrap."""
    if not values:
        return None
    if _all_zero_or_one(values):
        found = wilson_interval(int(sum(values)), len(values))
        method = WILSON
    else:
        found = bootstrap_interval(values)
        method = BOOTSTRAP
    return Interval(found[0], found[1], method) if found else None


def fast_p_values(fastest: Mapping[str, Attempt], problems: Sequence[str], p: float) -> list[float]:
    """fast_p per problem of ``problems``: 1 where its fastest correct attempt clears p."""
    return [1.0 if (f := fastest.get(slug)) is not None and is_fast(f, p) else 0.0 for slug in problems]


def pass_at_k_values(by_problem: Mapping[str, Sequence[Attempt]], problems: Sequence[str], k: int,
                     p: float = 0.0) -> list[float]:
    """pass@k (p = 0) or fast_p@k per problem of ``problems`` (0 where never tried)."""
    return [pass_at_k(len(t), sum(is_fast(a, p) for a in t), k) if (t := by_problem.get(slug)) else 0.0
            for slug in problems]


def metric_values(score: ModelScore, problems: Sequence[str]) -> dict[str, list[float]]:
    """Each metric's value on each of ``problems`` (the order given), keyed as ``metric_keys``:
    the mean of a list is the metric (problems never tried count 0)."""
    values: dict[str, list[float]] = {}
    for p in FAST_P:
        values[fast_key(p)] = fast_p_values(score.fastest, problems, p)
    none = (0, 0, 0)
    for k in KS:
        values[f"pass_at_{k}"] = [pass_at_k(t[0], t[1], k) if (t := score.tallies.get(slug, none))[0] else 0.0
                                  for slug in problems]
    for k in KS:
        values[f"fast_1_at_{k}"] = [pass_at_k(t[0], t[2], k) if (t := score.tallies.get(slug, none))[0] else 0.0
                                    for slug in problems]
    return values


def score_intervals(score: ModelScore, problems: Sequence[str]) -> dict[str, Interval]:
    """Every metric's 95% interval over ``problems`` (the whole set, sorted: ``score_model``)."""
    return {key: found for key, values in metric_values(score, problems).items()
            if (found := mean_interval(values)) is not None}


def paired_differences(a: ModelScore, b: ModelScore, problems: Sequence[str]) -> dict[str, Difference]:
    """Each metric of ``a`` minus ``b`` over the same ``problems`` (sorted), with its 95% paired
    bootstrap interval (the two were scored on one problem set, so the difference is paired) and,
    where every value of both is 0 or 1 (fast_p always), McNemar's exact p-value."""
    n = len(problems)
    if n == 0:
        return {}
    va, vb = metric_values(a, problems), metric_values(b, problems)
    spans = _bootstrap_columns([[x - y for x, y in zip(va[key], vb[key])] for key in va])
    found: dict[str, Difference] = {}
    for key, span in zip(va, spans):  # as paired_bootstrap_interval, all metrics in one product
        mean_a, mean_b = sum(va[key]) / n, sum(vb[key]) / n
        p_value = None
        if _all_zero_or_one(va[key]) and _all_zero_or_one(vb[key]):
            only_a = sum(1 for x, y in zip(va[key], vb[key]) if x > y)
            p_value = mcnemar_exact_p(only_a, sum(1 for x, y in zip(va[key], vb[key]) if y > x))
        found[key] = Difference(key, mean_a, mean_b, round(mean_a - mean_b, 12), span[0], span[1], n, p_value)
    return found


def difference_words(diff: Difference, a: str, b: str) -> str:
    """What a difference says, in words: who is ahead, or that the two cannot be told apart."""
    if not diff.distinguishable:
        return f"not distinguishable on these {diff.problems} problems"
    ahead, behind = (a, b) if diff.difference > 0 else (b, a)
    return f"{ahead} ahead of {behind} on these {diff.problems} problems"
