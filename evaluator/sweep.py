"""``pkb sweep``: one candidate against the reference over a range of message sizes.

Every size is one whole evaluation (``api.evaluate``) with the problem's sweep point as its size
(``sweep:<bytes>``, problems/spec.py): the same static checks, sandbox, correctness trials,
paired timing and re-checked timed calls as ``pkb eval``, so a point's speedup and interval mean
exactly what an evaluation's do. What this module adds is the axis (which sizes, which shape
parameter), the nccl-tests bandwidth figures, and one report over all the points
(evaluator/sweep.schema.json, docs/sweeps.md). Each point starts both sides afresh: correct
and simple, at the cost of process start-up per size (docs/sweeps.md says how long).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import problems
from problems.spec import Problem, _derive_seed, dtype_name, sweep_size

from . import __version__
from .api import evaluate
from .config import MIN_INTERVAL_ROUNDS, EvalConfig
from .hardware.collectives import bus_factor
from .launcher import ProgressHook
from .report import FailureClass, bounded_failure, fitted_text
from .static_checks import resolve_dtype

# 1.1: verdict "incomplete" (a sweep that skipped sizes and failed none is no pass), points[].abridged.
SWEEP_SCHEMA_VERSION = "1.1"
# Failures that do not depend on the size: after one, the other sizes would only repeat it.
SIZE_INDEPENDENT = {FailureClass.SYNTAX_ERROR.value, FailureClass.MISSING_SOLUTION.value,
                    FailureClass.IMPORT_ERROR.value}
# A size is started only with this many seconds of the deadline left, and at least this multiple
# of the previous size's wall time: an evaluation cut by the deadline would read as the
# candidate's deadlock, so a size that cannot finish is skipped (and said) instead.
MIN_POINT_S = 20.0
GROWTH = 1.5

# The portal reads at most 2,621,440 bytes of a worker's request (Django's DATA_UPLOAD_MAX_MEMORY_SIZE;
# past it a 413, and the worker stops retrying: the sweep would be lost). A sweep report embeds
# every size's whole report: at eight ranks on CPU one size's report was 317 KB (65 trials of 8
# ranks' checks) and nine sizes 2.79 MB, and a failing size's report may carry 170 KiB more of
# failure text (report.FAILURE_TEXT_BYTES; docs/sweeps.md, "How big a sweep report is"). By
# design the report stays within SWEEP_REPORT_BYTES of JSON as the worker posts it (ASCII-escaped):
# a sweep has at most MAX_POINTS sizes, the report outside its points at most HEAD_BYTES, and each
# point an equal share of the rest, within which its size's report is abridged, least useful part
# first (ABRIDGE), only as far as it must be.
SWEEP_REPORT_BYTES = 2_000_000
MAX_POINTS = 32
HEAD_BYTES = 24_000
COMMAND_BYTES = 4096
# An abridged report's failure text (report.FAILURE_TEXT_BYTES keeps up to 168 KiB of it).
ABRIDGED_FAILURE_TEXT_BYTES = {"message": 2048, "traceback": 4096, "compiler_output": 4096,
                               "stacks": 4096, "stderr": 4096}

_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20,
          "mib": 2**20, "g": 2**30, "gb": 2**30, "gib": 2**30}


def parse_bytes(text: str) -> int:
    """``4096``, ``4K``, ``64KiB``, ``1M``, ``256MiB``, ``1G`` -> bytes (binary units)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS or int(match.group(1)) <= 0:
        raise ValueError(f"message size {text!r}: expected a positive number of bytes such as 4096, "
                         "4K, 64KiB, 1M or 256MiB")
    return int(match.group(1)) * _UNITS[unit]


def format_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class SweepPoint:
    target_bytes: int  # the size asked for
    size: str  # its size name, what the evaluation runs (``sweep:<bytes>[:<base>]``)
    param: int  # the swept parameter's value there
    message_bytes: float  # the message size it gives (nccl-tests' ``size``)


def sweep_problem(slug: str) -> Problem:
    """The problem, which must declare a sweep axis."""
    problem = problems.get(slug)
    if problem.sweep is None:
        with_axis = [p.slug for p in problems.all_problems() if p.sweep is not None]
        raise ValueError(f"{slug} declares no sweep axis (Problem.sweep), so it cannot be swept; "
                         f"problems that can: {', '.join(with_axis)}")
    return problem


def sweep_points(problem: Problem, world_size: int, dtype: Optional[str] = None,
                 targets: Optional[Sequence[int]] = None, base: Optional[str] = None) -> list[SweepPoint]:
    """The points of a sweep, smallest first: one per distinct parameter value (two targets that
    round to the same shape are one point, the smaller target naming it)."""
    axis = problem.sweep
    if axis is None:
        raise ValueError(f"{problem.slug} declares no sweep axis")
    resolved = resolve_dtype(problem, dtype)
    wanted = sorted(set(targets or axis.bytes))
    if not wanted:
        raise ValueError("a sweep needs at least one message size")
    if len(wanted) > MAX_POINTS:
        raise ValueError(f"a sweep has at most {MAX_POINTS} message sizes, not {len(wanted)} (its report must "
                         "stay small enough for the portal)")
    points: dict[int, SweepPoint] = {}
    for target in wanted:
        size = sweep_size(target, base if base and base != axis.base else None)
        setting = problem.setting(world_size, size, resolved)  # checks world size, dtype, base
        value = int(setting[axis.param])
        if value not in points:
            points[value] = SweepPoint(target, size, value, axis.message_bytes(setting))
    return sorted(points.values(), key=lambda p: p.message_bytes)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def point_timing(report: dict[str, Any], message_bytes: float, factor: float) -> Optional[dict[str, Any]]:
    """The figures a sweep plots, from one evaluation's timing (None where it has none)."""
    timing = report.get("timing")
    if not timing:
        return None
    ref_ms, cand_ms = timing["reference"]["median_ms"], timing["candidate"]["median_ms"]

    def gbps(ms: Optional[float], times: float = 1.0) -> Optional[float]:
        """message bytes / time in GB/s, times ``times``; None for a time of zero or none."""
        return message_bytes / (ms / 1e3) / 1e9 * times if ms else None

    roofline = timing.get("roofline") or None
    roofline_ms = roofline["time_ms"] if roofline else None
    interval = timing.get("interval") or {}
    return {
        "reference_ms": ref_ms, "candidate_ms": cand_ms, "speedup": timing["speedup"],
        "interval": {"low": interval["low"], "high": interval["high"]} if interval else None,
        "stop": (timing.get("stop") or {}).get("reason"), "rounds": len(timing.get("rounds") or []),
        "reference_algbw_gbps": gbps(ref_ms), "candidate_algbw_gbps": gbps(cand_ms),
        "reference_busbw_gbps": gbps(ref_ms, factor), "candidate_busbw_gbps": gbps(cand_ms, factor),
        "roofline_ms": roofline_ms, "roofline_bound": roofline["bound"] if roofline else None,
        "roofline_busbw_gbps": gbps(roofline_ms, factor),
        "candidate_roofline_fraction": timing["candidate"].get("roofline_fraction"),
        "reference_roofline_fraction": timing["reference"].get("roofline_fraction"),
        "clocks_moved": bool((timing.get("clocks") or {}).get("moved")),
    }


def _point(point: SweepPoint, param: str, report: Optional[dict[str, Any]], factor: float,
           skipped: Optional[str] = None) -> dict[str, Any]:
    failure = (report or {}).get("failure")
    return {
        "target_bytes": point.target_bytes, "message_bytes": point.message_bytes, "size": point.size,
        "params": {param: point.param},
        "verdict": report["verdict"] if report else None,
        "failure": {"failure_class": failure["failure_class"], "message": failure["message"]} if failure else None,
        "timing": point_timing(report, point.message_bytes, factor) if report else None,
        "skipped": skipped, "report": report, "abridged": [],
    }


def _without_passing_ranks(report: dict[str, Any], kinds: tuple[str, ...] = ("correctness", "timed")) -> dict[str, Any]:
    return {**report, "trials": [{**t, "ranks": [r for r in t.get("ranks") or [] if not r.get("passed")]}
                                 if t.get("kind") in kinds else t for t in report.get("trials") or []]}


def _without_timed_passing_ranks(report: dict[str, Any]) -> dict[str, Any]:
    return _without_passing_ranks(report, ("timed",))


def _without_rounds(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "timing": {**report["timing"], "rounds": []}} if report.get("timing") else report


def _shorter_failure(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "failure": bounded_failure(report.get("failure"), ABRIDGED_FAILURE_TEXT_BYTES)}


def _without_trial_ranks(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "trials": [{**t, "ranks": []} for t in report.get("trials") or []]}


def _without_trials(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "trials": []}


def _failure_message_only(report: dict[str, Any]) -> dict[str, Any]:
    failure = report.get("failure")
    if not failure:
        return report
    return {**report, "failure": {**failure, "message": fitted_text(failure["message"], 1024),
                                  "traceback": None, "compiler_output": None, "stacks": {}, "stderr": {}}}


# How a size's report is abridged to fit its share of the sweep report, in this order, each step
# only if the one before left it too big (points[].abridged names the steps taken). First what a
# passing check says at length (every passing rank's per-output errors): of the checked timed calls
# (on CPU the judge outside checks up to 60 of them: 65 trials of 8 ranks made a size's report
# 317 KB), then of the seeded trials; then the timed rounds (the interval, medians and stop stay),
# the failure's text cut to ABRIDGED_FAILURE_TEXT_BYTES, the failing ranks' checks (which trial
# failed stays), the trials, and last all of the failure but its class, rank, trial, output and
# 1 KiB of its message. `pkb sweep --reports DIR` keeps every size's report whole.
ABRIDGE: tuple[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]], ...] = (
    ("timed_passing_ranks", _without_timed_passing_ranks), ("passing_ranks", _without_passing_ranks),
    ("rounds", _without_rounds), ("failure_text", _shorter_failure),
    ("trial_ranks", _without_trial_ranks), ("trials", _without_trials), ("failure_details", _failure_message_only),
)


def point_budget(n_points: int) -> int:
    """The bytes of JSON one of ``n_points`` points may take in the sweep report."""
    return (SWEEP_REPORT_BYTES - HEAD_BYTES) // max(n_points, 1)


def _json_bytes(document: Any) -> int:
    return len(json.dumps(document))  # ASCII-escaped, as `pkb sweep` and the worker write it


def abridged(row: dict[str, Any], budget: int) -> dict[str, Any]:
    """``row`` (a point) within ``budget`` bytes of JSON, its report abridged step by step (ABRIDGE)
    only as far as it must be."""
    if row["report"] is None or _json_bytes(row) <= budget:
        return row
    for name, step in ABRIDGE:
        row = {**row, "report": step(row["report"]), "abridged": [*row["abridged"], name]}
        if _json_bytes(row) <= budget:
            break
    return row


def sweep_verdict(points: Sequence[dict[str, Any]]) -> str:
    """``fail`` if any size failed; else ``incomplete`` if any size was not run (the sweep was not
    judged at every size it was asked for, so it is no pass); else ``pass``."""
    if any(p["verdict"] == "fail" for p in points):
        return "fail"
    if any(p["verdict"] != "pass" for p in points):
        return "incomplete"
    return "pass"


def run_sweep(config: EvalConfig, *, targets: Optional[Sequence[int]] = None, base: Optional[str] = None,
              on_point: Optional[Callable[[int, int, dict[str, Any]], None]] = None,
              on_progress: Optional[ProgressHook] = None, command: Optional[str] = None) -> dict[str, Any]:
    """Evaluate ``config``'s candidate at every point of the problem's sweep; ``config.size`` is
    ignored, ``config.deadline_s`` bounds the whole sweep. ``on_point(i, n, point)`` after each, with
    the size's whole report (the sweep report's may be abridged: ``abridged``).
    Bad arguments raise ValueError before anything runs."""
    started_at, started = _now(), time.monotonic()
    problem = sweep_problem(config.problem)
    axis = problem.sweep
    assert axis is not None
    points = sweep_points(problem, config.world_size, config.dtype, targets, base)
    factor = bus_factor(axis.collective, config.world_size)
    budget = point_budget(len(points))
    rows: list[dict[str, Any]] = []
    stop_reason: Optional[str] = None
    needed = MIN_POINT_S
    for i, point in enumerate(points):
        left = None if config.deadline_s is None else config.deadline_s - (time.monotonic() - started)
        if stop_reason is None and left is not None and left < needed:
            stop_reason = (f"the sweep's deadline ({config.deadline_s:.0f} s) left {max(left, 0):.0f} s, "
                           f"less than this size would need (~{needed:.0f} s)")
        if stop_reason is not None:
            row = _point(point, axis.param, None, factor, skipped=stop_reason)
        else:
            # A seed per size, derived from the sweep's: the same command gives the same inputs.
            seed = None if config.seed is None else _derive_seed(config.seed, "sweep", point.target_bytes) % 2**31
            began = time.monotonic()
            report = dict(evaluate(dataclasses.replace(config, size=point.size, seed=seed, deadline_s=left),
                                   on_progress))
            needed = max(MIN_POINT_S, GROWTH * (time.monotonic() - began))
            row = _point(point, axis.param, report, factor)
            failure = report.get("failure") or {}
            if failure.get("failure_class") in SIZE_INDEPENDENT:
                stop_reason = (f"the candidate failed with {failure['failure_class']} at "
                               f"{format_bytes(point.message_bytes)}, which does not depend on the size")
        if on_point is not None:
            on_point(i, len(points), row)  # with the size's whole report (`pkb sweep --reports`)
        rows.append(abridged(row, budget))
    run = [r for r in rows if r["report"] is not None]
    first = run[0]["report"] if run else {}
    return {
        "schema": "pkb-sweep", "schema_version": SWEEP_SCHEMA_VERSION, "evaluator_version": __version__,
        "problem": {"slug": problem.slug, "id": problem.id, "version": problems.version(problem)},
        "setting": {"world_size": config.world_size, "device": config.device,
                    "backend": config.backend,
                    "dtype": dtype_name(resolve_dtype(problem, config.dtype)), "trials": config.trials,
                    "base": base or axis.base},
        "axis": {"param": axis.param, "collective": axis.collective, "bus_factor": factor,
                 "message": "nccl-tests' size for the collective: " + MESSAGE_MEANING[axis.collective]},
        "solution": first.get("solution"),
        "hardware_profile": first.get("hardware_profile"),
        "sandbox": "on" if config.sandbox else "off",
        "verdict": sweep_verdict(rows),
        "complete": all(r["skipped"] is None for r in rows),
        "failed_sizes": [r["target_bytes"] for r in rows if r["verdict"] == "fail"],
        "points": rows, "command": None if command is None else fitted_text(command, COMMAND_BYTES),
        "started_at": started_at, "finished_at": _now(), "wall_s": time.monotonic() - started,
    }


MESSAGE_MEANING = {
    "all_reduce": "the buffer", "broadcast": "the buffer", "reduce": "the buffer",
    "send_recv": "the buffer", "all_gather": "the gathered output", "gather": "the gathered output",
    "reduce_scatter": "the unsharded input", "scatter": "the unsharded input",
    "all_to_all": "one rank's send buffer",
}


def _too_few_rounds(timing: dict[str, Any]) -> bool:
    """An interval from fewer rounds than one needs (config.MIN_INTERVAL_ROUNDS)."""
    return bool(timing.get("interval")) and 0 < (timing.get("rounds") or 0) < MIN_INTERVAL_ROUNDS


def _speed_text(timing: dict[str, Any]) -> str:
    """The speedup with its 95% interval in brackets; from too few rounds, no brackets."""
    if not timing:
        return "-"
    iv = timing.get("interval")
    if _too_few_rounds(timing):
        return f"{timing['speedup']:.3f}x no interval ({timing['rounds']})"
    if iv:
        return f"{timing['speedup']:.3f}x [{iv['low']:.3f}, {iv['high']:.3f}]"
    return f"{timing['speedup']:.3f}x"


def _num(value: Optional[float], fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render_table(sweep: dict[str, Any]) -> str:
    """The sweep as a table: one line per size, then the verdict and where it failed."""
    s, axis = sweep["setting"], sweep["axis"]
    cpu = s["device"] == "cpu"
    lines = [f"{sweep['problem']['slug']}  world={s['world_size']} {s['device']}/{s['backend']} {s['dtype']}  "
             f"sweep of {axis['param']} ({axis['collective']}, busbw = algbw x {axis['bus_factor']:.3f})"
             + ("  CPU timings: a smoke test, not a measurement" if cpu else "")]
    header = (f"{'message':>10} {axis['param']:>10} {'verdict':>7} {'ref ms':>9} {'cand ms':>9} "
              f"{'speedup [95%]':>22} {'ref busbw':>10} {'cand busbw':>10} {'roof busbw':>10} {'cand/roof':>9}")
    lines += [header, "-" * len(header)]
    for p in sweep["points"]:
        t = p["timing"] or {}
        if p["skipped"]:
            verdict = "skip"
        else:
            verdict = (p["verdict"] or "-").upper()
        speed = _speed_text(t)
        lines.append(f"{format_bytes(p['message_bytes']):>10} {p['params'][axis['param']]:>10} {verdict:>7} "
                     f"{_num(t.get('reference_ms'), '.4f'):>9} {_num(t.get('candidate_ms'), '.4f'):>9} {speed:>22} "
                     f"{_num(t.get('reference_busbw_gbps'), '.4g'):>10} {_num(t.get('candidate_busbw_gbps'), '.4g'):>10} "
                     f"{_num(t.get('roofline_busbw_gbps'), '.4g'):>10} "
                     f"{_num(t.get('candidate_roofline_fraction'), '.1%'):>9}")
    lines.append("busbw in GB/s (1e9 bytes/s); roof = the roofline of hardware profile "
                 f"{sweep['hardware_profile'] or '(none)'}")
    if any(_too_few_rounds(p["timing"] or {}) for p in sweep["points"]):
        lines.append(f"no interval (n): timed over n alternating rounds, fewer than the {MIN_INTERVAL_ROUNDS} "
                     "a 95% interval needs")
    passed = sum(1 for p in sweep["points"] if p["verdict"] == "pass")
    not_run = sum(1 for p in sweep["points"] if p["verdict"] is None)
    lines.append(f"verdict: {sweep['verdict'].upper()} ({passed} of {len(sweep['points'])} sizes passed"
                 + (f", {not_run} not run" if not_run else "") + ")"
                 + (": not judged at every size, so no pass" if sweep["verdict"] == "incomplete" else ""))
    for p in sweep["points"]:
        if p["failure"]:
            lines.append(f"  failed at {format_bytes(p['message_bytes'])}: {p['failure']['failure_class']}: "
                         f"{p['failure']['message']}")
    skipped = [p for p in sweep["points"] if p["skipped"]]
    if skipped:
        lines.append(f"  {len(skipped)} sizes not run: {skipped[0]['skipped']}")
    shortened = [p for p in sweep["points"] if p.get("abridged")]
    if shortened:
        lines.append(f"  {len(shortened)} sizes' reports abridged to keep the sweep report under "
                     f"{SWEEP_REPORT_BYTES:,} bytes (points[].abridged; `pkb sweep --reports DIR` keeps them whole)")
    lines.append(f"wall time {sweep['wall_s']:.1f} s")
    return "\n".join(lines)
