"""What the run pages show: the matrix of problems x samples, the tables, the chart data."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from django.conf import settings

from portal.leaderboards import metrics
from portal.leaderboards import services as boards
from portal.leaderboards.services import Track
from portal.lib.tables import Column, Table, share_columns

from . import scoring
from .board_plan import read_plan
from .models import Run, RunSample
from .services import problem_label
from .pkb.importer import MULTICAST_NOTE


# How a kernel fails when the multicast it relies on is absent: a null multicast address or a
# missing handle attribute (a wrong answer is a wrong answer, whatever the kernel relies on).
MULTICAST_FAILURES = ("runtime_error", "crash", "deadlock", "compile_error")


def remaining_files(run: Run) -> list[str]:
    """The files of a seeded run's directory that its board plans and has not evaluated yet
    (``docs/measurements/board/plan.json``, beside the results file the run was seeded from):
    the page said "38 of the 40 files" without naming the two."""
    if not (run.seeded_from and run.imported_from and run.files_planned):
        return []
    try:
        plan = read_plan(settings.BASE_DIR / Path(run.seeded_from).parent)
    except (OSError, ValueError):
        return []
    given = set(run.samples.values_list("name", flat=True))
    return [name for name in plan.files.get(run.imported_from, []) if name not in given]


def verdict_class(sample: RunSample) -> str:
    """One word per cell: pending, pass, fast (correct and faster than 1x by fast_p's rule),
    infra (the job was lost), needs_multicast (a PKB file that relies on NVLink multicast and
    failed without it), or the report's failure class."""
    sub = sample.submission
    if sub is None:
        return "rejected"
    if sub.is_pending:
        return "pending"
    if sub.status == "failed":
        return "infra"
    attempt = scoring.attempt_of(sample.run, sample)
    if attempt and metrics.is_fast(attempt, 1.0):
        return "fast"
    if sub.is_correct:
        return "pass"
    if MULTICAST_NOTE in sample.message and sub.failure_class in MULTICAST_FAILURES:
        return "needs_multicast"  # it broke, and it relies on what the hosts switch off
    return sub.failure_class or "fail"


def matrix(run: Run) -> dict[str, Any]:
    # One row per problem of the run (a PKB problem is its own row even where another maps to
    # the same problem of ours); its samples fill the columns in order.
    rows: dict[str, list[Any]] = defaultdict(lambda: [None] * run.k)
    filled: dict[str, int] = defaultdict(int)
    for sample in scoring.accepted(run):
        key = problem_label(scoring.run_problem(sample))
        cells, column = rows[key], filled[key]
        filled[key] += 1
        if column < run.k:
            sub = sample.submission
            cells[column] = {"class": verdict_class(sample), "submission": sub.pk,
                                   "speedup": sub.speedup, "low": sub.speedup_low,
                                   "high": sub.speedup_high, "name": sample.name,
                                   "turn": sample.turn}
    return {"columns": list(range(run.k)),
            "rows": [{"problem": key.partition(" ")[0], "label": key, "cells": c} for key, c in rows.items()]}


def scores_table(result: dict[str, Any]) -> Table:
    scopes = [("run_problems", "the run's problems"), ("suite", "every problem on the hardware")]
    fast = list(result["suite"]["fast_p"])
    ks = list(result["suite"]["pass_at_k"])
    columns = [Column("scope", "Over"), Column("problems", "Problems", "int"),
               Column("correct", "Correct", "int"), Column("attempts", "Attempts", "int")]
    # With intervals (scoring.scores(..., intervals=True)): each share and its 95% interval over
    # the scope's problems, one cell on the page, key_low and key_high in exports.
    spans = "intervals" in result["suite"]
    def share(key: str, label: str) -> list[Column]:
        return share_columns(key, label) if spans else [Column(key, label, "pct")]
    columns += [c for p in fast for c in share(f"fast_{p}", f"fast_{p}")]
    columns += [c for k in ks for c in share(f"pass_at_{k}", f"pass@{k}")]
    columns += [c for k in ks for c in share(f"fast_1_at_{k}", f"fast_1@{k}")]
    columns += [Column("geomean_speedup", "Geo-mean speedup", "ratio")]
    rows = []
    for key, label in scopes:
        s = result[key]
        row = {"scope": label, "problems": s["problems"], "correct": s["correct"],
               "attempts": s["attempts"], "geomean_speedup": s["geomean_speedup"]}
        row.update({f"fast_{p}": v for p, v in s["fast_p"].items()})
        row.update({f"pass_at_{k}": v for k, v in s["pass_at_k"].items()})
        row.update({f"fast_1_at_{k}": v for k, v in s["fast_1_at_k"].items()})
        row["interval_problems"] = s["problems"]
        for group, prefix in (("fast_p", "fast_"), ("pass_at_k", "pass_at_"), ("fast_1_at_k", "fast_1_at_")):
            for at, span in s.get("intervals", {}).get(group, {}).items():
                if span:
                    row.update({f"{prefix}{at}_low": span["low"], f"{prefix}{at}_high": span["high"],
                                f"{prefix}{at}_method": span["method"]})
        rows.append(row)
    return Table("scores", "Over the run's problems, and over every problem ranked on its hardware", columns, rows)


def files_table(run: Run) -> Table:
    columns = [Column("name", "File"), Column("status", "Status"), Column("problem", "Problem"),
               Column("turn", "Agent turn", "int"), Column("pkb_id", "PKB id", "int"),
               Column("adapter", "Adapter"), Column("code", "Code"), Column("message", "Why / note")]
    rows = [{"name": s.name, "status": s.status, "problem": s.problem.slug if s.problem else "",
             "turn": s.turn, "pkb_id": s.pkb_id, "adapter": s.adapter, "code": s.code,
             "message": s.message}
            for s in run.samples.select_related("problem").order_by("status", "pkb_id", "name")]
    return Table("files", "Every file given to the run", columns, rows)


def curves_beside(run: Run, limit: int = 8) -> dict[str, Any]:
    """fast_p curves of this run and the latest other runs on the same hardware."""
    others = list(Run.objects.filter(hardware=run.hardware).exclude(pk=run.pk)
                  .select_related("model").order_by("-created_at")[:limit - 1])
    runs = [run, *others]
    samples = {r.pk: scoring.scored(r) for r in runs}  # once a run: read twice, it was 40% of the page
    top = 0.0
    for r in runs:
        for s in samples[r.pk]:
            sub = s.submission
            if sub is not None and sub.is_correct and sub.speedup:
                top = max(top, sub.speedup)
    grid = metrics.curve_grid(top)
    return {"p": grid, "series": {r.label: scoring.fast_p_curve(r, grid, samples[r.pk]) for r in runs},
            "current": run.label}


def runs_track(runs: list[Run]) -> Track:
    """Runs as the comparison page's models: each run's attempts under its label, the problem
    set the union of their problems."""
    problems: dict[str, list[str]] = {}
    attempts = []
    for run in runs:
        for sample in scoring.scored(run):
            problems[sample.problem.slug] = sample.problem.categories
            if (a := scoring.attempt_of(run, sample)) is not None:
                attempts.append(a)
    return Track(runs[0].hardware, problems, attempts)


def runs_table(runs: list[Run]) -> Table:
    """One row per run: the leaderboard's columns over each run's own problems."""
    columns = [Column("run", "Run", "run"), Column("model", "Model"), Column("backend", "Backend"),
               Column("precision", "Precision"), Column("k", "k", "int"),
               Column("problems", "Problems", "int"), Column("correct", "Correct", "int")]
    columns += [Column(f"fast_{p:g}".replace(".", "_"), f"fast_{p:g}", "pct") for p in scoring.SCORED_P]
    columns += [Column("pass_at_k", "pass@k", "pct"), Column("fast_1_at_k", "fast_1@k", "pct"),
                Column("evaluated", "Evaluated")]
    rows = []
    suites: dict[int, dict[str, list[str]]] = {}  # one problem set per hardware, not per run
    for run in runs:
        result = scoring.scores(run, suites)
        s = result["run_problems"]
        row = {"run": run.pk, "model": run.model.name,
               "backend": run.backend, "precision": run.precision, "k": run.k,
               "problems": s["problems"], "correct": s["correct"],
               "pass_at_k": s["pass_at_k"][str(run.k)], "fast_1_at_k": s["fast_1_at_k"][str(run.k)],
               "evaluated": evaluated(result)}
        row.update({f"fast_{p}".replace(".", "_"): v for p, v in s["fast_p"].items()})
        rows.append((_run_rank(run, row), row))
    rows.sort(key=lambda pair: pair[0])
    return Table("runs", "Runs (scored over each run's own problems)", columns,
                 [row for _, row in rows], note=_runs_note(runs))


def evaluated(result: dict[str, Any]) -> str:
    """How much of the run has a verdict: its jobs still queued or running, else, for a seeded
    run whose board has not reached its whole directory, how many of the directory's files
    (a bare "all" there read as a finished directory while the board was a third done)."""
    if not result["complete"]:
        return f"{result['pending']} pending"
    planned = result.get("files_planned")
    if planned and result["samples"] < planned:
        return f"{result['samples']} of {planned} files"
    return "all"


def _runs_note(runs: list[Run]) -> str:
    on_cpu = sum(not boards.ranks_by_speed(run.hardware) for run in runs)
    if not on_cpu:
        return ""
    if on_cpu == len(runs):
        return ("Ranked by problems solved, then pass@k: on CPU hardware (a smoke test) the fast_p "
                "columns are not ranked.")
    return ("Runs on GPU hardware come first, ranked by fast_1, then problems solved; runs on CPU "
            "hardware (a smoke test: their fast_p columns are not ranked) follow, by problems "
            "solved, then pass@k.")


def _run_rank(run: Run, row: dict[str, Any]) -> tuple[Any, ...]:
    """GPU runs by fast_1 then problems solved, as the model leaderboard; CPU runs after them,
    by problems solved then pass@k (services.rank_key's rule)."""
    if boards.ranks_by_speed(run.hardware):
        return (0, -(row.get("fast_1") or 0), -(row["correct"] or 0))
    return (1, -(row["correct"] or 0), -(row["pass_at_k"] or 0))
