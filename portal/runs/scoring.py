"""A run's progress and scores, with the leaderboard's own metrics (portal/leaderboards/metrics.py).

Two problem sets: the run's (the problems it holds accepted samples for, which is how a
researcher computes fast_p over a sample directory) and the suite's (every problem ranked on
the run's hardware, unattempted ones counting as failures: comparable with the leaderboard).
Only finished evaluations are attempts; a job the infrastructure lost (``failed``) is not.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from portal.leaderboards import metrics, services as boards
from portal.leaderboards.metrics import FAST_P, Attempt

from .models import Run, RunSample
from .services import problem_key

SCORED_P = (0.0, 0.5, 1.0, 1.5, 2.0)
# A file the run refused for what the model wrote is a failed sample, as ParallelKernelBench
# counts one that does not build: left out, one correct file beside two that did not parse
# scored pass@1 100%, not 1 in 3. Refusals for the run's or the portal's reasons (k reached, no
# adapter, an unknown problem, a file too large for the portal) are no attempt.
MODEL_FAULTS = frozenset({"syntax_error", "missing_solution", "not_utf8", "empty_source"})


# What scores, progress and the matrix never read: a submission's report (kilobytes each), its
# source and its sweep. Loaded, they were two thirds of /runs/ (every run's scores).
HEAVY = ("submission__report", "submission__source", "submission__sweep")


def accepted(run: Run) -> list[RunSample]:
    return list(run.samples.filter(status=RunSample.ACCEPTED)
                .select_related("submission", "problem").defer(*HEAVY)
                .order_by("problem__number", "index"))


def refused_for_the_model(run: Run) -> list[RunSample]:
    """Files refused for a fault of what the model wrote, at a problem the run would evaluate."""
    return list(run.samples.filter(status=RunSample.REJECTED, code__in=MODEL_FAULTS, problem__isnull=False)
                .select_related("problem").order_by("problem__number", "pk"))


def scored(run: Run) -> list[RunSample]:
    """Every sample that is an attempt once finished: the accepted, and the model's faults."""
    return accepted(run) + refused_for_the_model(run)


def run_problem(sample: RunSample) -> str:
    """The problem of the run that ``sample`` answers (services.problem_key)."""
    return problem_key(sample.problem.slug, sample.pkb_id)


def attempt_of(run: Run, sample: RunSample, problem: str | None = None) -> Attempt | None:
    """The sample as an attempt at ``problem`` (default: our problem's slug), once finished; a
    file refused for the model's fault (MODEL_FAULTS) is a failed one."""
    if sample.status == RunSample.REJECTED:
        return Attempt(model=run.label, problem=problem or sample.problem.slug, correct=False,
                       failure_class=sample.code) if sample.code in MODEL_FAULTS and sample.problem else None
    sub = sample.submission
    if sub is None or sub.status != "finished":
        return None
    return Attempt(model=run.label, problem=problem or sample.problem.slug, correct=sub.is_correct,
                   speedup=sub.speedup, roofline_fraction=sub.roofline_fraction,
                   failure_class=sub.failure_class, speedup_low=sub.speedup_low,
                   speedup_high=sub.speedup_high, submission=sub.pk)


def progress(run: Run, samples: list[RunSample] | None = None) -> dict[str, Any]:
    per: dict[str, dict[str, int]] = defaultdict(lambda: {"queued": 0, "running": 0, "finished": 0,
                                                          "failed": 0, "correct": 0})
    for sample in accepted(run) if samples is None else samples:
        status = sample.submission.status
        row = per[sample.problem.slug]
        row["running" if status in ("compiling", "running") else status] += 1
        row["correct"] += int(sample.submission.is_correct)
    totals = {key: sum(r[key] for r in per.values())
              for key in ("queued", "running", "finished", "failed", "correct")}
    samples = sum(totals[k] for k in ("queued", "running", "finished", "failed"))
    rejected = run.samples.filter(status=RunSample.REJECTED).count()
    return {"run": run.pk, "samples": samples, "rejected": rejected, **totals,
            "done": samples > 0 and totals["queued"] + totals["running"] == 0,
            "problems": [{"problem": slug, **row} for slug, row in per.items()]}


def _interval(values: list[float]) -> dict[str, Any] | None:
    found = metrics.mean_interval(values)
    return {"low": found.low, "high": found.high, "method": found.method} if found else None


def _scope(run: Run, attempts: list[Attempt], problems: dict[str, list[str]],
           intervals: bool = False) -> dict[str, Any]:
    score = metrics.score_model(run.label, attempts, problems)
    by_problem: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        if a.problem in problems:
            by_problem[a.problem].append(a)
    ks = sorted({1, run.k})
    n = len(problems)
    found = {
        "problems": n, "attempted": score.attempted, "attempts": score.attempts,
        "correct": score.correct,
        "fast_p": {f"{p:g}": score.fast_p[p] for p in FAST_P if p in SCORED_P},
        "pass_at_k": {str(k): metrics.mean_pass_at_k(by_problem, n, k) for k in ks},
        "fast_1_at_k": {str(k): metrics.mean_pass_at_k(by_problem, n, k, 1.0) for k in ks},
        "geomean_speedup": score.geomean_speedup,
        "mean_roofline_fraction": score.mean_roofline_fraction,
        "solved_without_interval": score.point_estimates,
        "outcomes": score.failures,
    }
    if intervals:  # 95% intervals over the problems (docs/runs.md, "Scores")
        order = sorted(problems)
        found["intervals"] = {
            "fast_p": {f"{p:g}": _interval(metrics.fast_p_values(score.fastest, order, p))
                       for p in FAST_P if p in SCORED_P},
            "pass_at_k": {str(k): _interval(metrics.pass_at_k_values(by_problem, order, k)) for k in ks},
            "fast_1_at_k": {str(k): _interval(metrics.pass_at_k_values(by_problem, order, k, 1.0)) for k in ks}}
    return found


def scores(run: Run, suites: dict[int, dict[str, list[str]]] | None = None,
           intervals: bool = False) -> dict[str, Any]:
    """``suites``: problem sets by hardware id, filled and reused where many runs are scored.
    ``intervals``: each scope's shares with their 95% intervals over its problems (``intervals``:
    ``fast_p``, ``pass_at_k``, ``fast_1_at_k``, each ``{"low", "high", "method"}``); left out of
    the runs list, which scores 200 runs."""
    samples = accepted(run)
    tried = samples + refused_for_the_model(run)
    # Over the run's problems each PKB problem counts once (two may answer one of ours); over
    # the suite, as on the leaderboard, a sample is an attempt at our problem.
    own = [a for s in tried if (a := attempt_of(run, s, run_problem(s)))]
    attempts = [a for s in tried if (a := attempt_of(run, s))]
    suites = {} if suites is None else suites
    if run.hardware_id not in suites:
        suites[run.hardware_id] = boards.problem_set(run.hardware)
    suite = suites[run.hardware_id]
    mine = {run_problem(s): s.problem.categories for s in tried}
    state = progress(run, samples)
    return {"run": run.pk, "model": run.model.name, "hardware": run.hardware.slug, "k": run.k,
            "complete": state["done"], "pending": state["queued"] + state["running"],
            # A seeded run may hold part of its directory so far: "complete" is of its jobs,
            # these two say how much of the directory they are (null: a run made here).
            "samples": state["samples"], "files_planned": run.files_planned,
            "run_problems": _scope(run, own, mine, intervals),
            "suite": _scope(run, attempts, {slug: cats for slug, cats in suite.items()}, intervals)}


def fast_p_curve(run: Run, grid: list[float], samples: list[RunSample] | None = None) -> list[float]:
    """The run's fast_p at each p of ``grid``, over its own problems (``samples``: its
    ``scored`` ones, where the caller has them)."""
    samples = scored(run) if samples is None else samples
    attempts = [a for s in samples if (a := attempt_of(run, s, run_problem(s)))]
    problems = {run_problem(s) for s in samples}
    by_problem: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        by_problem[a.problem].append(a)
    fastest = {slug: f for slug, tries in by_problem.items() if (f := metrics.fastest_correct(tries))}
    return metrics.fast_p_curve(fastest, len(problems), grid)
