"""The problem page's sweep chart (docs/sweeps.md): on one hardware, the reference's bus bandwidth
per message size, the roofline, and the best submissions' sweeps."""

from __future__ import annotations

from typing import Any

from portal.catalog.models import Hardware, ProblemVersion
from portal.catalog.presenters import collective_curves, roofline_ms
from portal.lib import sweeps
from portal.submissions.models import Submission, SweepStatus

# Candidate curves on a problem's chart: more than this and the lines hide each other.
BEST_CURVES = 5


def roofline_curve(version: ProblemVersion, hardware: Hardware, world_size: int) -> dict[str, list[float]] | None:
    """The roofline's bus bandwidth per message size on ``hardware``'s measured rates, from the
    traffic the catalog computed for each sweep point (no sweep needs to have run)."""
    axis = (version.details or {}).get("sweep") or {}
    at = (axis.get("points") or {}).get(str(world_size))
    if not isinstance(at, dict) or "rows" not in at:
        return None
    dtype = ((version.details or {}).get("dtypes") or ["bfloat16"])[0]
    xs, ys = [], []
    for row in at["rows"]:
        rl = roofline_ms(row, hardware.profile, dtype)
        if rl and rl["time_ms"] > 0:
            xs.append(row["message_bytes"])
            ys.append(row["message_bytes"] / (rl["time_ms"] / 1e3) / 1e9 * at["bus_factor"])
    return {"x": xs, "y": ys} if xs else None


def probe_curve(hardware: Hardware, collective: str, world_size: int) -> dict[str, Any] | None:
    """The collective's bus bandwidth as the hardware probe measured it (`pkb probe`, at the
    profile's world size): the library's curve before any sweep of this problem has run."""
    curves = collective_curves(hardware.profile or {})
    if not curves or curves.get("world_size") != world_size:
        return None
    series = curves["series"].get(collective)
    if not series or not series["x"]:
        return None
    return {**series, "label": f"{curves['backend'] or 'library'} {collective} (hardware probe, {curves['dtype']})"}


def problem_chart(version: ProblemVersion, hardware: Hardware) -> dict[str, Any] | None:
    """The problem page's chart on ``hardware``: the reference's bus bandwidth per size (from the
    latest finished sweep there), the roofline, and the best sweep of each of the fastest models."""
    axis = (version.details or {}).get("sweep")
    world_size = hardware.ranked_world_size(version.problem.world_sizes)
    if not axis or world_size is None:
        return None
    swept = (Submission.objects.finished().filter(problem_version=version, sweep_status=SweepStatus.FINISHED)
             .on_track(hardware, world_size).select_related("model"))
    latest = swept.order_by("-sweep_finished_at").first()
    best: dict[str, Submission] = {}
    for sub in swept.filter(verdict="pass").order_by("-speedup", "finished_at"):
        if sub.model.name not in best and len(best) < BEST_CURVES:
            best[sub.model.name] = sub
    chart = sweeps.problem_chart(latest.sweep if latest else None,
                                 [(f"{name} (#{sub.pk})", sub.pk, sub.sweep) for name, sub in best.items()])
    roofline = roofline_curve(version, hardware, world_size)
    if chart is None:
        if roofline is None:
            return None
        chart = {"collective": axis.get("collective", ""), "world_size": world_size,
                 "device": hardware.device, "reference": {"x": [], "y": []}, "candidates": []}
    if roofline is not None:
        chart["roofline"] = roofline
    if (probe := probe_curve(hardware, axis.get("collective", ""), world_size)) is not None:
        chart["probe"] = probe
    chart.update(hardware=hardware.slug, reference_submission=latest.pk if latest else None,
                 param=axis.get("param", ""))
    return chart
