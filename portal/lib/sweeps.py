"""The portal's one reader of sweep reports (evaluator/sweep.schema.json, docs/sweeps.md).

A sweep report is checked where a worker hands it in (``sweep_error``): the sweep schema, each
size's evaluation report against the report schema, and that it is the submission's own sweep.
The pages read stored sweeps through the chart builders here, which tolerate missing figures (a
failing or skipped size has no timing).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping, Optional

from .reports import schema_error


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    import evaluator

    schema = json.loads((Path(evaluator.__file__).parent / "sweep.schema.json").read_text())
    return Draft202012Validator(schema)


def sweep_error(sweep: Any, *, problem: str, world_size: int, source_sha256: str) -> Optional[str]:
    """Why ``sweep`` cannot be stored as this submission's sweep, in one line; None when it can."""
    if isinstance(sweep, Mapping) and sweep.get("verdict") == "pass" and verdict(sweep) != "pass":
        # What sweep schema 1.0 let through (the schema below refuses it too, less plainly).
        return ("says pass, but not every size ran and passed: a sweep with sizes not run and none failed "
                "is incomplete (sweep schema 1.1)")
    error = next(iter(sorted(_validator().iter_errors(sweep), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        return f"does not match the sweep schema (evaluator/sweep.schema.json) at {where}: {error.message[:300]}"
    for i, point in enumerate(sweep["points"]):
        if point["report"] is not None and (problem_at := schema_error(point["report"])) is not None:
            return f"points/{i}/report does not match the evaluator's report schema at {problem_at}"
    if sweep["problem"]["slug"] != problem:
        return f"is a sweep of {sweep['problem']['slug']}, not of this submission's problem {problem}"
    if sweep["setting"]["world_size"] != world_size:
        return f"ran at world size {sweep['setting']['world_size']}, not the submission's {world_size}"
    solution = sweep.get("solution")
    if solution is not None and solution["sha256"] != source_sha256:
        return "swept another file than the submission's source (sha256 differs)"
    return None


def verdict(sweep: Any) -> str:
    """The verdict over all sizes as the portal shows it: ``pass`` only where every size ran and
    passed. Sweeps stored before sweep schema 1.1 said ``pass`` with sizes not run (a deadline):
    they read ``incomplete``, as `pkb sweep` now says itself."""
    said = sweep.get("verdict") if isinstance(sweep, Mapping) else None
    if said == "pass" and (sweep.get("complete") is False or any(p.get("verdict") != "pass" for p in _points(sweep))):
        return "incomplete"
    return said if said in ("pass", "fail", "incomplete") else ""


def as_shown(sweep: Any) -> Any:
    """``sweep`` with its verdict as ``verdict`` reads it (what the API and the page show)."""
    if not isinstance(sweep, Mapping) or sweep.get("verdict") == verdict(sweep):
        return sweep
    return {**sweep, "verdict": verdict(sweep)}


def _points(sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    points = sweep.get("points") if isinstance(sweep, Mapping) else None
    return [p for p in points or [] if isinstance(p, Mapping)]  # type: ignore[misc]


def _timing(point: Mapping[str, Any]) -> dict[str, Any]:
    timing = point.get("timing")
    return dict(timing) if isinstance(timing, Mapping) else {}


def rows(sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per size for the submission page's table."""
    out = []
    for p in _points(sweep):
        t = _timing(p)
        failure = p.get("failure") or {}
        interval = t.get("interval") or {}
        out.append({
            "message_bytes": p.get("message_bytes"), "params": p.get("params") or {},
            "verdict": p.get("verdict") or ("skipped" if p.get("skipped") else ""),
            "failure_class": failure.get("failure_class", ""), "failure_message": failure.get("message", ""),
            "skipped": p.get("skipped") or "",
            "reference_ms": t.get("reference_ms"), "candidate_ms": t.get("candidate_ms"),
            "speedup": t.get("speedup"), "low": interval.get("low"), "high": interval.get("high"),
            "rounds": t.get("rounds") or None,  # unknown where the point has no round count
            "reference_busbw": t.get("reference_busbw_gbps"), "candidate_busbw": t.get("candidate_busbw_gbps"),
            "roofline_busbw": t.get("roofline_busbw_gbps"),
            "candidate_fraction": t.get("candidate_roofline_fraction"),
            "reference_fraction": t.get("reference_roofline_fraction"),
            "clocks_moved": bool(t.get("clocks_moved")),
        })
    return out


def _series(sweep: Mapping[str, Any], key: str) -> dict[str, list[Any]]:
    """x (message bytes) and y (``key`` of the size's timing) where the size has it."""
    xs, ys = [], []
    for p in _points(sweep):
        value = _timing(p).get(key)
        if value is not None and p.get("message_bytes"):
            xs.append(p["message_bytes"])
            ys.append(value)
    return {"x": xs, "y": ys}


def _failed(sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"x": p["message_bytes"], "failure_class": (p.get("failure") or {}).get("failure_class", "")}
            for p in _points(sweep) if p.get("verdict") == "fail" and p.get("message_bytes")]


def submission_chart(sweep: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The submission page's two charts: bus bandwidth of the candidate, the reference and the
    roofline against the message size; the speedup with its interval against the size."""
    if not _points(sweep):
        return None
    axis = sweep.get("axis") or {}
    setting = sweep.get("setting") or {}
    speed = _series(sweep, "speedup")
    lows, highs = [], []
    for p in _points(sweep):
        t = _timing(p)
        if t.get("speedup") is not None:
            interval = t.get("interval") or {}
            lows.append(interval.get("low", t["speedup"]))
            highs.append(interval.get("high", t["speedup"]))
    return {
        "problem": (sweep.get("problem") or {}).get("slug", ""),
        "collective": axis.get("collective", ""), "bus_factor": axis.get("bus_factor"),
        "world_size": setting.get("world_size"), "device": setting.get("device", ""),
        "hardware_profile": sweep.get("hardware_profile") or "",
        "candidate": _series(sweep, "candidate_busbw_gbps"), "reference": _series(sweep, "reference_busbw_gbps"),
        "roofline": _series(sweep, "roofline_busbw_gbps"),
        "speedup": {**speed, "low": lows, "high": highs}, "failed": _failed(sweep),
    }


def problem_chart(reference_sweep: Optional[Mapping[str, Any]],
                  best: list[tuple[str, int, Mapping[str, Any]]]) -> Optional[dict[str, Any]]:
    """The problem page's chart: the reference's bus bandwidth and the roofline (from the latest
    sweep on this hardware) and each best submission's candidate curve (label, id, sweep)."""
    if reference_sweep is None and not best:
        return None
    base = reference_sweep or best[0][2]
    axis = base.get("axis") or {}
    return {
        "collective": axis.get("collective", ""), "bus_factor": axis.get("bus_factor"),
        "device": (base.get("setting") or {}).get("device", ""),
        "world_size": (base.get("setting") or {}).get("world_size"),
        "reference": _series(base, "reference_busbw_gbps"), "roofline": _series(base, "roofline_busbw_gbps"),
        "candidates": [{"label": label, "submission": pk, **_series(sweep, "candidate_busbw_gbps")}
                       for label, pk, sweep in best],
    }
