"""From finished submissions to the leaderboard tables and chart data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from portal.catalog.models import Hardware, Problem, ProblemVersion, ReferenceTiming
from portal.lib import reports
from portal.lib.tables import Column, Table, difference_columns, share_columns, speedup_columns
from portal.submissions.models import Submission

from . import metrics
from .metrics import FAST_P, KS, Attempt, ModelScore


@dataclass
class Track:
    """What one leaderboard ranks: the problem set and the attempts on one hardware."""

    hardware: Hardware
    problems: dict[str, list[str]]  # slug -> categories
    attempts: list[Attempt]

    @property
    def top_speedup(self) -> float:
        return max((a.speedup or 0 for a in self.attempts if a.correct), default=0.0)


@dataclass
class ScoredTrack:
    """A track with every model scored: all that the model leaderboard and any comparison on
    one hardware need, small enough to cache (the attempts themselves are not kept)."""

    hardware: Hardware
    problems: dict[str, list[str]]
    scores: dict[str, ModelScore]
    top_speedup: float

    def ranked(self, models: list[str] | None = None) -> list[ModelScore]:
        """Like ``scores(track, models)``: a model with no attempts here scores zero."""
        found = list(self.scores.values()) if not models else [
            self.scores.get(name) or metrics.score_model(name, [], self.problems, intervals=True)
            for name in models]
        return sorted(found, key=rank_key(self.hardware))


def scored_track(hardware: Hardware) -> ScoredTrack:
    """Scores with their intervals over problems: computed once per generation (cache.py)."""
    t = track(hardware)
    return ScoredTrack(hardware, t.problems, {s.model: s for s in scores(t, intervals=True)}, t.top_speedup)


ATTEMPT_FIELDS = ("id", "verdict", "speedup", "speedup_low", "speedup_high", "roofline_fraction",
                  "failure_class", "world_size", "model__name", "problem_version__problem__slug")


def reports_of(pks: list[int]) -> dict[int, Any]:
    """The reports of a few submissions, in one query."""
    return dict(Submission.objects.filter(pk__in=pks).values_list("pk", "report"))


def _ranked_world_sizes(hardware: Hardware) -> dict[str, int]:
    found = {}
    for problem in Problem.objects.active():
        ws = hardware.ranked_world_size(problem.world_sizes)
        if ws is not None:
            found[problem.slug] = ws
    return found


def problem_set(hardware: Hardware, world_sizes: dict[str, int] | None = None) -> dict[str, list[str]]:
    """slug -> categories of every active problem ranked on this hardware."""
    world_sizes = _ranked_world_sizes(hardware) if world_sizes is None else world_sizes
    return {p.slug: p.categories for p in Problem.objects.active() if p.slug in world_sizes}


def track(hardware: Hardware) -> Track:
    world_sizes = _ranked_world_sizes(hardware)
    problems = problem_set(hardware, world_sizes)
    # Plain tuples of the indexed numbers: no model instances, and the reports (kilobytes
    # each) stay in the database. 100,000 rows in about a second.
    rows = (Submission.objects.finished().current_versions().on_track(hardware)
            .values_list(*ATTEMPT_FIELDS))
    attempts = []
    for pk, verdict, speedup, low, high, roofline, failure, ws, model, slug in rows.iterator(chunk_size=5000):
        if world_sizes.get(slug) != ws:
            continue
        attempts.append(Attempt(model=model, problem=slug, correct=verdict == "pass",
                                speedup=speedup, roofline_fraction=roofline, failure_class=failure,
                                speedup_low=low, speedup_high=high, submission=pk))
    return Track(hardware, problems, attempts)


def scores(t: Track, models: list[str] | None = None, intervals: bool = False) -> list[ModelScore]:
    """``intervals``: each score with its 95% intervals over the problems (a few ms a model)."""
    names = models or sorted({a.model for a in t.attempts})
    by_model: dict[str, list[Attempt]] = {name: [] for name in names}
    for a in t.attempts:  # one pass, not one per model
        if a.model in by_model:
            by_model[a.model].append(a)
    found = [metrics.score_model(name, by_model[name], t.problems, intervals) for name in names]
    return sorted(found, key=rank_key(t.hardware))


# How a board is ordered, as the API's ``ranked_by`` says it. CPU timings are a smoke test (copies
# of the reference have scored 0.39x and 3.81x on one 2-core host: docs/timing.md), so nothing on
# CPU hardware is ordered by a speed: there models rank by what they got right.
BY_FAST_1 = "fast_1"  # models on GPU: fast_1, then problems solved, then name
BY_SPEEDUP = "speedup"  # a problem's submissions on GPU: the highest speedup first
BY_CORRECTNESS = "correctness"  # on CPU: models by problems solved, pass@1, name; a problem's
#                                 submissions by the date of each model's first correct one
NOT_RANKED = "not ranked: CPU smoke test"
# A run's page counts the run's own problems; two ParallelKernelBench problems mapped to one of ours
# (PKB 2 and 34 are both all-gather) are two there and one here. Both are right; say which this is.
COUNTED_PER_PROBLEM = ("Tried: problems with at least one attempt; the rest of Problems count as failures. "
                       "Correct and Problems count this site's problems: two imported problems that map to "
                       "one of ours count once here, and twice on their run's page.")


def ranks_by_speed(hardware: Hardware) -> bool:
    return hardware.kind != "cpu"


def ranked_by(hardware: Hardware, board: str = "models") -> str:
    """``board``: "models" (a model leaderboard or comparison) or "problem" (one problem's)."""
    if not ranks_by_speed(hardware):
        return BY_CORRECTNESS
    return BY_FAST_1 if board == "models" else BY_SPEEDUP


def _by_fast_1(s: ModelScore) -> tuple[float, int, str]:
    return (-s.fast_p[1.0], -s.correct, s.model)


def _by_correctness(s: ModelScore) -> tuple[int, float, str]:
    return (-s.correct, -s.pass_at[1], s.model)


def rank_key(hardware: Hardware) -> Callable[[ModelScore], tuple[Any, ...]]:
    return _by_fast_1 if ranks_by_speed(hardware) else _by_correctness


def smoke_label(hardware: Hardware) -> str:
    """What a ranked table on CPU hardware says in its title: its timings are not measurements,
    and it is not ordered by them."""
    return "" if ranks_by_speed(hardware) else (
        " (CPU smoke test: ranked by correctness; timings are not performance measurements)")


def _unranked(label: str, hardware: Hardware) -> str:
    """A speed column's header on CPU is marked *, which the table's note says orders nothing
    (the whole words in every header widened the model table past a 1400 px page)."""
    return label if ranks_by_speed(hardware) else f"{label} *"


def _pct(p: float) -> str:
    return f"{p:g}".replace(".", "_")


def speedup_cells(key: str, speedup: float | None, low: float | None, high: float | None,
                  report: Any) -> dict[str, Any]:
    """The row values of ``speedup_columns(key, ...)``, with the tooltip that says what they are
    and, for pages only, how many rounds timed it (fewer than an interval needs: no brackets)."""
    span = reports.interval(report)
    return {key: speedup, f"{key}_low": low, f"{key}_high": high,
            f"{key}_note": span.note if span else reports.POINT_NOTE,
            f"{key}_rounds": span.rounds if span else None}


def model_table(t: Track | ScoredTrack, ranked: list[ModelScore]) -> Table:
    hw = t.hardware
    # Tried: how many of the problems a score rests on (the others count as failures).
    correctness = [Column("model", "Model", "model"), Column("attempts", "Attempts", "int"),
                   Column("attempted", "Tried", "int"),
                   Column("correct", "Correct", "int"), Column("problems", "Problems", "int"),
                   Column("fast_0", "fast_0", "pct")]
    # Each share with its 95% interval over the problems: one cell on pages, key_low and
    # key_high beside key in exports and the API.
    correctness[-1:] = share_columns("fast_0", "fast_0")
    passes = [c for k in KS for c in share_columns(f"pass_at_{k}", f"pass@{k}")]
    speed = [c for p in FAST_P if p > 0 for c in share_columns(f"fast_{_pct(p)}", _unranked(f"fast_{p:g}", hw))]
    speed_at = [c for k in KS for c in share_columns(f"fast_1_at_{k}", _unranked(f"fast_1@{k}", hw))]
    rest = [Column("geomean_speedup", _unranked("Geo-mean speedup", hw), "ratio"),
            Column("mean_roofline_fraction", _unranked("Mean roofline fraction", hw), "pct"),
            Column("point_estimates", "Solved without interval", "int")]
    # On CPU what orders the rows (correct, pass@k) comes first; the speed columns follow it.
    columns = (correctness + speed + passes + speed_at + rest if ranks_by_speed(hw)
               else correctness + passes + speed + speed_at + rest)
    rows = []
    for s in ranked:
        row: dict[str, Any] = {"model": s.model, "attempts": s.attempts,
                               "attempted": s.attempted, "correct": s.correct,
                               "problems": s.problems, "geomean_speedup": s.geomean_speedup,
                               "mean_roofline_fraction": s.mean_roofline_fraction,
                               "point_estimates": s.point_estimates}
        row.update({f"fast_{_pct(p)}": v for p, v in s.fast_p.items()})
        row.update({f"pass_at_{k}": v for k, v in s.pass_at.items()})
        row.update({f"fast_1_at_{k}": v for k, v in s.fast1_at.items()})
        for key, span in s.intervals.items():
            row.update({f"{key}_low": span.low, f"{key}_high": span.high, f"{key}_method": span.method})
        row["interval_problems"] = s.problems
        rows.append(row)
    n = len(t.problems)
    # How far apart two rows must be to differ at all.
    grain = (f"Shares are out of {n} problem{'s' if n != 1 else ''}: one problem is "
             f"{100 / n:.1f} points. Under each share, its 95% interval over the problems "
             "(Wilson's for a share of problems, a bootstrap for a mean of pass@k estimates); two "
             "rows whose intervals overlap may still differ: the comparison page tests each pair. "
             if n else "")
    note = grain + COUNTED_PER_PROBLEM if ranks_by_speed(hw) else (
        "Ranked by problems solved (Correct), then pass@1, then name. CPU timings are a smoke test "
        "of the pipeline, so the speed columns marked * (fast_p above 0, fast_1@k, geo-mean "
        f"speedup, roofline fraction) are shown but order nothing: * {NOT_RANKED}. {COUNTED_PER_PROBLEM}")
    return Table("models", f"Models on {hw.slug}{smoke_label(hw)}", columns, rows, note=note)


def category_table(ranked: list[ModelScore]) -> Table:
    columns = [Column("model", "Model"), Column("category", "Category"),
               Column("problems", "Problems", "int"), Column("correct", "Correct", "int"),
               Column("fast_1", "Faster than reference", "int")]
    rows = [{"model": s.model, "category": cat, **vals}
            for s in ranked for cat, vals in s.by_category.items()]
    return Table("categories", "By category", columns, rows)


def category_matrix(ranked: list[ModelScore]) -> Table:
    """By category for pages: one row per category that some model solved a problem of, a pair
    of columns per model. The long form (``category_table``, one row per model and category)
    stays for the API; on a page it was 72 rows, mostly zeros."""
    problems: dict[str, int] = {}
    for s in ranked:
        for cat, vals in s.by_category.items():
            problems[cat] = max(problems.get(cat, 0), vals["problems"])
    solved = [cat for cat in sorted(problems)
              if any(s.by_category.get(cat, {}).get("correct") for s in ranked)]
    columns = [Column("category", "Category"), Column("problems", "Problems", "int")]
    for s in ranked:
        columns += [Column(f"correct:{s.model}", f"{s.model}: correct", "int"),
                    Column(f"fast_1:{s.model}", f"{s.model}: faster", "int")]
    rows = [{"category": cat, "problems": problems[cat],
             **{f"{key}:{s.model}": s.by_category.get(cat, {}).get(key, 0)
                for s in ranked for key in ("correct", "fast_1")}} for cat in solved]
    unsolved = sorted(set(problems) - set(solved))
    note = (f"Not shown: {len(unsolved)} categories where no model has a correct solution "
            f"({', '.join(unsolved)})." if unsolved else "")
    return Table("categories", "By category", columns, rows, note=note)


def failure_table(ranked: list[ModelScore]) -> Table:
    outcomes = sorted({o for s in ranked for o in s.failures}, key=lambda o: (o != "correct", o))
    columns = [Column("model", "Model")] + [Column(o, o.replace("_", " "), "int") for o in outcomes]
    rows = [{"model": s.model, **{o: s.failures.get(o, 0) for o in outcomes}} for s in ranked]
    return Table("failures", "Outcome of every attempt", columns, rows)


def per_problem_table(t: Track | ScoredTrack, ranked: list[ModelScore]) -> Table:
    """A row per problem that some compared model solved (a row of dashes for each of the
    others made the compare page 137 rows long); the note says how many are left out."""
    columns = [Column("problem", "Problem")]
    columns += [c for s in ranked for c in speedup_columns(s.model, s.model)]
    rows = []
    found = reports_of([b.submission for s in ranked for b in s.best.values() if b.submission])
    for slug in sorted(t.problems):
        row: dict[str, Any] = {"problem": slug}
        for s in ranked:
            if (best := s.best.get(slug)) is not None and best.speedup is not None:
                report = found.get(best.submission)
                row.update(speedup_cells(s.model, best.speedup, best.speedup_low, best.speedup_high, report))
        if len(row) > 1:
            rows.append(row)
    left = len(t.problems) - len(rows)
    note = f"Not shown: {left} of the {len(t.problems)} problems, which none of these models solved." if left else ""
    return Table("per_problem", "Best correct speedup per problem", columns, rows, note=note)


def differences(t: Track | ScoredTrack, ranked: list[ModelScore]) -> list[dict[str, Any]]:
    """Every pair of ``ranked`` (the higher ranked first, as ``a``): each metric of a minus b over
    the problem set both are scored on, with its 95% paired bootstrap interval over those
    problems, McNemar's exact p-value for shares of problems (which then decides), and in words. 66 pairs for 12 models, about a second: cached with the page."""
    problems = sorted(t.problems)
    found = []
    for i, a in enumerate(ranked):
        for b in ranked[i + 1:]:
            diffs = metrics.paired_differences(a, b, problems)
            found.append({
                "a": a.model, "b": b.model, "problems": len(problems),
                "metrics": {key: {"label": metrics.metric_label(key), "a": d.a, "b": d.b,
                                  "difference": d.difference, "low": d.low, "high": d.high,
                                  "distinguishable": d.distinguishable, "method": d.method,
                                  "p_value": d.p_value,
                                  "words": metrics.difference_words(d, a.model, b.model)}
                            for key, d in diffs.items()},
                "summary": difference_summary(a.model, b.model, diffs, len(problems))})
    return found


INTERVALS = {
    "level": metrics.LEVEL, "over": "problems",
    "fast_p": metrics.WILSON,
    "pass_at_k": f"{metrics.WILSON} where every problem's estimate is 0 or 1, else {metrics.BOOTSTRAP}",
    "fast_1_at_k": f"{metrics.WILSON} where every problem's estimate is 0 or 1, else {metrics.BOOTSTRAP}",
    "differences": (f"paired {metrics.BOOTSTRAP} interval; distinguishable by McNemar's {metrics.EXACT} test "
                    "at 5% where both models' per-problem values are 0 or 1, else by the interval leaving out 0"),
    "resamples": metrics.RESAMPLES, "seed": metrics.SEED,
}  # what the API says of its intervals (docs/portal.md, "Intervals over problems")


def compared(t: Track | ScoredTrack, ranked: list[ModelScore]) -> dict[str, Any]:
    """What a comparison page shows: its tables (differences after the models, where two or more
    are compared) and its charts' data (with the differences, for their chart)."""
    found = differences(t, ranked)
    tables = [model_table(t, ranked)] + ([differences_table(found)] if found else [])
    tables += [per_problem_table(t, ranked), category_matrix(ranked), failure_table(ranked)]
    return {"tables": tables, "charts": {**comparison_charts(t, ranked), "differences": found}}


def _points(value: float) -> str:
    return f"{100 * value:+.1f}".replace("-", "−")


def _p_text(d: metrics.Difference) -> str:
    return f", exact p = {d.p_value:.2g}" if d.p_value is not None else ""


def difference_summary(a: str, b: str, diffs: dict[str, metrics.Difference], n: int) -> str:
    """One pair's differences in a sentence: where one is ahead, and what cannot be told apart."""
    ahead = [(key, d) for key, d in diffs.items() if d.distinguishable]
    level = [metrics.metric_label(key) for key, d in diffs.items() if not d.distinguishable]
    if not ahead:
        return (f"{a} and {b} are not distinguishable on these {n} problems: no difference passes "
                "its test (McNemar's exact test for shares of problems, else the 95% interval holds 0).")
    said = []
    for lead in (a, b):
        mine = [f"{metrics.metric_label(key)} ({_points(d.difference)} points, 95% interval "
                f"{_points(d.low)} to {_points(d.high)}{_p_text(d)})" for key, d in ahead
                if (d.difference > 0) == (lead == a)]
        if mine:
            said.append(f"{lead} ahead on " + ", ".join(mine))
    text = f"{a} − {b} on these {n} problems: " + "; ".join(said)
    if level:
        text += f"; not distinguishable on these {n} problems on {', '.join(level)}"
    return text + "."


def differences_table(found: list[dict[str, Any]]) -> Table:
    """``differences`` as a table: a row per pair, a cell per metric (points, with its interval)."""
    keys = metrics.metric_keys()
    columns = [Column("pair", "Pair (first − second)"), Column("problems", "Problems", "int")]
    columns += [c for key in keys for c in difference_columns(key, metrics.metric_label(key))]
    rows = []
    for pair in found:
        row: dict[str, Any] = {"pair": f"{pair['a']} − {pair['b']}", "problems": pair["problems"],
                               "interval_problems": pair["problems"]}
        for key, d in pair["metrics"].items():
            row.update({key: d["difference"], f"{key}_low": d["low"], f"{key}_high": d["high"],
                        f"{key}_words": d["words"]})
        rows.append(row)
    n = found[0]["problems"] if found else 0
    note = (f"Each cell: the first model's share minus the second's, in points, over the same {n} "
            "problems (a problem a model never tried counts as a failure for it), with its 95% "
            f"paired bootstrap interval ({metrics.RESAMPLES} resamples of the problems, a fixed seed). "
            "For fast_p and other shares of problems, McNemar's exact test on the problems where the "
            "two differ decides (the bootstrap is narrow when only a few differ). "
            "A bold difference is one model ahead; a plain one: not distinguishable on these "
            f"{n} problems.")
    return Table("differences", "Paired differences", columns, rows, note=note)


def _end(s: ModelScore, p: float, end: str) -> float | None:
    span = s.intervals.get(metrics.fast_key(p))
    return getattr(span, end) if span else None


def comparison_charts(t: Track | ScoredTrack, ranked: list[ModelScore]) -> dict[str, Any]:
    top = t.top_speedup
    grid = metrics.curve_grid(top)
    n = len(t.problems)
    failures = failure_table(ranked)
    return {
        "fast_p": {"p": grid, "series": {s.model: metrics.fast_p_curve(s.fastest, n, grid)
                                         for s in ranked}},
        # fast_p at each p of FAST_P with its 95% interval over the problems: the curves' error bars
        "fast_p_intervals": {s.model: {"p": list(FAST_P), "value": [s.fast_p[p] for p in FAST_P],
                                       "low": [_end(s, p, "low") for p in FAST_P],
                                       "high": [_end(s, p, "high") for p in FAST_P]} for s in ranked},
        "speedups": {s.model: {slug: b.speedup for slug, b in s.best.items()} for s in ranked},
        "intervals": {s.model: {slug: [b.speedup_low, b.speedup_high] for slug, b in s.best.items()
                                if b.speedup_low is not None and b.speedup_high is not None}
                      for s in ranked},
        "categories": {s.model: {c: v["fast_1"] / v["problems"] if v["problems"] else 0
                                 for c, v in s.by_category.items()} for s in ranked},
        "categories_correct": {s.model: {c: v["correct"] / v["problems"] if v["problems"] else 0
                                         for c, v in s.by_category.items()} for s in ranked},
        "failures": {row["model"]: {c.key: row[c.key] for c in failures.columns[1:]}
                     for row in failures.rows},
        "problems": sorted(t.problems),
        "ranked_by": ranked_by(t.hardware),  # "correctness": the speed charts order nothing
    }


@dataclass
class Baseline:
    """The reference's time on one problem and hardware, and how it was measured."""

    median_ms: float
    p10_ms: float | None
    p90_ms: float | None
    roofline_fraction: float | None
    basis: str  # "evaluation" (timed beside a candidate) or "reference-only"
    submission: int | None = None
    date: Any = None
    source_file: str = ""


@dataclass
class ProblemBoard:
    version: ProblemVersion
    hardware: Hardware
    table: Table
    baseline: Baseline | None

    @property
    def baseline_ms(self) -> float | None:
        return self.baseline.median_ms if self.baseline else None


def baseline(version: ProblemVersion, hardware: Hardware, world_size: int | None) -> Baseline | None:
    """The latest full evaluation's reference timing; else a measured reference-only timing."""
    latest = (Submission.objects.finished().filter(problem_version=version, reference_ms__isnull=False)
              .on_track(hardware, world_size).order_by("-finished_at").first())
    if latest is not None:
        ref = reports.side_timing(latest.report, "reference")
        return Baseline(latest.reference_ms, ref.get("p10_ms"), ref.get("p90_ms"),
                        ref.get("roofline_fraction"), "evaluation", latest.pk, latest.finished_at)
    timing = ReferenceTiming.objects.filter(problem_version=version, hardware=hardware,
                                            world_size=world_size, size=hardware.size).first()
    if timing is None:
        return None
    return Baseline(timing.median_ms, timing.p10_ms, timing.p90_ms, timing.roofline_fraction,
                    ReferenceTiming.KIND, None, timing.measured_on, timing.source_file)


def problem_board(version: ProblemVersion, hardware: Hardware) -> ProblemBoard:
    """One row per model under the reference baseline. On GPU its best correct submission,
    fastest first, ranked; on CPU (a smoke test) its first correct submission, earliest first,
    with no rank: who got it right and when, not who was fastest."""
    world_size = hardware.ranked_world_size(version.problem.world_sizes)
    finished = (Submission.objects.finished().filter(problem_version=version)
                .on_track(hardware, world_size).select_related("model", "user"))
    by_speed = ranks_by_speed(hardware)
    best: dict[tuple[str, str], Submission] = {}
    # Reports (kilobytes each) only for the rows shown, in one query.
    passes = finished.filter(verdict="pass").defer("report", "source")
    if by_speed:
        # By the interval's lower end, as fast_p credits: by the point, resubmitting one kernel
        # until a run came out lucky raised its row (red team, 2026-11-28).
        passes = sorted(passes, key=lambda s: (-(metrics.credited_speedup(s) or 0.0), -(s.speedup or 0.0),
                                               s.finished_at))
    else:
        passes = passes.order_by("finished_at", "pk")
    for sub in passes:
        # each person who uploads as ``human`` is ranked on their own, under their name
        key = (sub.model.name, sub.credit if sub.model.kind == "human" else "")
        if key not in best:
            best[key] = sub
    base = baseline(version, hardware, world_size)
    # On CPU the rank stays in exports and the API as null (bots read the key) but not on the page.
    columns = [Column("rank", "#", "int", page=by_speed), Column("model", "Model"), Column("credit", "By"),
               *speedup_columns("speedup", _unranked("Speedup", hardware)),
               Column("time_ms", "Median ms", "float"),
               Column("p10_ms", "p10 ms", "float"), Column("p90_ms", "p90 ms", "float"),
               Column("roofline_fraction", _unranked("Roofline fraction", hardware), "pct"),
               Column("backend", "Backend"), Column("date", "Date" if by_speed else "First correct", "date"),
               Column("submission", "Submission", "link")]
    rows: list[dict[str, Any]] = []
    if base:
        rows.append({"rank": None, "model": "baseline: reference", "speedup": 1.0,
                     "time_ms": base.median_ms, "p10_ms": base.p10_ms, "p90_ms": base.p90_ms,
                     "backend": "nccl" if hardware.kind == "gpu" else "gloo",
                     "roofline_fraction": base.roofline_fraction, "date": base.date,
                     "submission": base.submission, "baseline": True})
    # ``best`` is already in the board's order (dicts keep insertion order).
    ordered = list(best.values())
    found = reports_of([sub.pk for sub in ordered])
    for rank, sub in enumerate(ordered, 1):
        report = found.get(sub.pk)
        cand = reports.side_timing(report, "candidate")
        rows.append({"rank": rank if by_speed else None, "model": sub.model.name, "credit": sub.credit,
                     **speedup_cells("speedup", sub.speedup, sub.speedup_low, sub.speedup_high, report),
                     "time_ms": sub.candidate_ms, "p10_ms": cand.get("p10_ms"),
                     "p90_ms": cand.get("p90_ms"), "roofline_fraction": sub.roofline_fraction,
                     "backend": sub.backend, "date": sub.finished_at, "submission": sub.pk})
    note = "" if by_speed else (
        "Each model's first correct submission, earliest first: CPU timings are a smoke test, so "
        f"this board is not ordered by speedup and has no rank (* {NOT_RANKED}).")
    table = Table("problem", f"{version.problem.slug} on {hardware.slug}{smoke_label(hardware)}",
                  columns, rows, note=note)
    return ProblemBoard(version, hardware, table, base)


@dataclass
class HardwareSummary:
    """One card of the home page: who leads on a hardware and, on GPU, its fastest correct result."""

    hardware: Hardware
    problems: int
    leader: ModelScore | None  # by the hardware's ranking (``rank_key``); the reference excluded
    fastest: Attempt | None  # the highest correct speedup of any model but the reference; on CPU
    #                          (a smoke test) None: a CPU card names no fastest result
    models: int
    fastest_by: str = ""  # who that result is credited to (Submission.credit)


def best_per_hardware() -> list[HardwareSummary]:
    """Every hardware that has results, GPU profiles first (CPU results are smoke tests)."""
    summaries = []
    for hw in Hardware.objects.active().order_by("kind", "-gpus", "slug"):
        t = track(hw)
        ranked = [s for s in scores(t) if s.model != "reference"]
        if not t.attempts:
            continue
        correct = [a for a in t.attempts if a.correct and a.speedup is not None and a.model != "reference"]
        fastest = metrics.best_correct(correct) if ranks_by_speed(hw) else None
        sub = (Submission.objects.select_related("model", "user").defer("report", "source")
               .filter(pk=fastest.submission).first() if fastest and fastest.submission else None)
        summaries.append(HardwareSummary(
            hardware=hw, problems=len(t.problems), leader=ranked[0] if ranked else None,
            fastest=fastest, models=len(ranked), fastest_by=sub.credit if sub else ""))
    return sorted(summaries, key=lambda s: (s.hardware.kind != "gpu", -s.hardware.gpus, s.hardware.slug))


def default_hardware() -> Hardware | None:
    """The hardware with the most finished results: what a visitor most likely wants."""
    from django.db.models import Count, Q

    return (Hardware.objects.active()
            .annotate(n=Count("submissions", filter=Q(submissions__status="finished")))
            .order_by("-n", "builtin", "slug").first())
