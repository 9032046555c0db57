"""The submission page's view of a report: trials, per-rank timings, failure details."""

from __future__ import annotations

from typing import Any, Mapping

from portal.lib import reports

from .models import Submission
from .lifecycle import overdue_reason


def status_payload(sub: Submission) -> dict[str, Any]:
    return {
        "id": sub.pk, "status": sub.status,
        "status_reason": sub.status_reason or (overdue_reason(sub) if sub.is_pending else ""),
        "progress": sub.progress if sub.is_pending else "",
        "queue_position": sub.queue_position(), "verdict": sub.verdict,
        "failure_class": sub.failure_class, "speedup": sub.speedup,
        "speedup_low": sub.speedup_low, "speedup_high": sub.speedup_high,
        "created_at": sub.created_at.isoformat(),
        "started_at": sub.started_at.isoformat() if sub.started_at else None,
        "finished_at": sub.finished_at.isoformat() if sub.finished_at else None,
        "done": not sub.is_pending,
        "sweep_status": sub.sweep_status,
    }


def report_view(sub: Submission, report: Any = None) -> dict[str, Any] | None:
    """``report``: the one the viewer may read (Submission.report_for); the stored one if None."""
    report = sub.report if report is None else report
    if not isinstance(report, dict):
        return None
    timing = reports.mapping(report, "timing")
    failure = reports.mapping(report, "failure") or None
    span = reports.interval(report)
    return {
        "trials": [_trial(t) for t in reports.trials(report)],
        "timing": timing,
        "interval": span,
        "speedup_note": span.note if span else (reports.POINT_NOTE if timing else ""),
        "stop": reports.mapping(report, "timing", "stop") or None,
        "stop_reason": reports.STOP_REASONS.get(reports.text(report, "timing", "stop", "reason"),
                                                reports.text(report, "timing", "stop", "reason")),
        "rounds": _rounds_chart(report, timing, span),
        "round_rows": [{"round": i, **r} for i, r in enumerate(reports.rounds(report), 1)],
        "clocks": reports.mapping(report, "timing", "clocks") or None,
        "clocks_moved": reports.clocks_moved(report),
        "clock_sides": _clock_rows(report),
        "ranks": _rank_timings(timing),
        "failure": failure,
        "stacks": sorted((failure or {}).get("stacks", {}).items()) if failure else [],
        "stderr": sorted((failure or {}).get("stderr", {}).items()) if failure else [],
        "setting": reports.mapping(report, "setting"),
        "software": reports.mapping(report, "software"),
        "wall_time": reports.mapping(report, "wall_time"),
        "roofline": timing.get("roofline") or None,
        "unconfined": reports.ran_unconfined(report),
    }


def _trial(trial: dict[str, Any]) -> dict[str, Any]:
    ranks = []
    for r in trial.get("ranks") or []:
        outputs = r.get("outputs") or []
        errs = [o.get("max_abs_err") for o in outputs if o.get("max_abs_err") is not None]
        bad = [o for o in outputs if o.get("status") not in (None, "ok")]
        ranks.append({"rank": r.get("rank"), "passed": r.get("passed"),
                      "max_abs_err": max(errs) if errs else None,
                      "status": bad[0].get("status") if bad else "ok",
                      "mismatched": sum(int(o.get("mismatched") or 0) for o in outputs)})
    return {"index": trial.get("index"), "kind": trial.get("kind"), "seed": trial.get("seed"),
            "passed": trial.get("passed"), "ranks": ranks}


def _rounds_chart(report: dict[str, Any], timing: dict[str, Any],
                  span: reports.Interval | None) -> dict[str, Any] | None:
    """The per-round ratios, their median (the speedup) and interval, for the rounds chart."""
    rounds = reports.rounds(report)
    if not rounds:
        return None
    return {"round": list(range(1, len(rounds) + 1)), "ratio": [r["ratio"] for r in rounds],
            "candidate_ms": [r["candidate_ms"] for r in rounds],
            "reference_ms": [r["reference_ms"] for r in rounds],
            "median": timing.get("speedup"),
            # no band from fewer rounds than an interval needs: their spread is not one
            **({"low": span.low, "high": span.high, "level": span.level}
               if span and not span.too_few_rounds else {"low": None, "high": None, "level": None})}


def _rank_timings(timing: dict[str, Any]) -> dict[str, Any] | None:
    ref = (timing.get("reference") or {}).get("per_rank_median_ms") or []
    cand = (timing.get("candidate") or {}).get("per_rank_median_ms") or []
    if not ref and not cand:
        return None
    n = max(len(ref), len(cand))
    return {"ranks": list(range(n)), "reference": list(ref) + [None] * (n - len(ref)),
            "candidate": list(cand) + [None] * (n - len(cand)),
            "rows": [{"rank": i, "reference": ref[i] if i < len(ref) else None,
                      "candidate": cand[i] if i < len(cand) else None} for i in range(n)]}


def _clock_rows(report: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """("before rounds, GPU 1", {sm_mhz: ..}) per GPU snapshot the evaluator took around the rounds."""
    rows = []
    for moment, label in (("start", "before rounds"), ("end", "after rounds")):
        snapshots = (reports.mapping(report, "timing", "clocks") or {}).get(moment)
        for snap in snapshots if isinstance(snapshots, list) else []:
            if isinstance(snap, dict):
                rows.append((f"{label}, GPU {snap.get('gpu')}", {k: v for k, v in snap.items() if k != "gpu"}))
    return rows
