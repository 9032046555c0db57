"""The submission page's view of a report: trials, per-rank timings, failure details."""

from __future__ import annotations

from typing import Any

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
        "created_at": sub.created_at.isoformat(),
        "started_at": sub.started_at.isoformat() if sub.started_at else None,
        "finished_at": sub.finished_at.isoformat() if sub.finished_at else None,
        "done": not sub.is_pending,
    }


def report_view(sub: Submission) -> dict[str, Any] | None:
    report = sub.report
    if not isinstance(report, dict):
        return None
    timing = reports.mapping(report, "timing")
    failure = reports.mapping(report, "failure") or None
    return {
        "trials": [_trial(t) for t in reports.trials(report)],
        "timing": timing,
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
