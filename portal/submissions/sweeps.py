"""A submission's own message-size sweep as its page shows it (docs/sweeps.md)."""

from __future__ import annotations

from typing import Any

from portal.lib import sweeps

from .models import Submission


def submission_view(sub: Submission, shown: Any = None) -> dict[str, Any] | None:
    """The submission page's sweep section, or None where no sweep was asked for. ``shown``: the
    sweep report the viewer may read (Submission.sweep_for); the stored one if None."""
    if not sub.sweep_requested:
        return None
    shown = sweeps.as_shown(sub.sweep if shown is None else shown)
    sweep = shown if isinstance(shown, dict) else None
    return {
        "status": sub.sweep_status, "status_label": sub.get_sweep_status_display(),
        "reason": sub.sweep_reason, "sweep": sweep, "verdict": sweeps.verdict(sweep),
        "not_run": sum(1 for row in sweeps.rows(sweep) if row["verdict"] == "skipped") if sweep else 0,
        "rows": sweeps.rows(sweep) if sweep else [],
        "chart": sweeps.submission_chart(sweep) if sweep else None,
        "param": ((sweep or {}).get("axis") or {}).get("param", ""),
        "complete": bool((sweep or {}).get("complete", True)),
    }
