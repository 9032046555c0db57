"""What each size of a sweep report came to: passed, failed, or not run (docs/sweeps.md).

A size the sweep skipped (its deadline, or a failure no size can change) was never judged: it is
neither a pass nor a failure, and a sweep with such sizes and no failure is ``incomplete`` (sweep
schema 1.1). Standard library only, like the scripts that import it on the GPU hosts.
"""

from __future__ import annotations

from typing import Any

NOT_RUN = "not run"


def size_outcome(point: dict[str, Any]) -> str:
    """``pass``, ``fail`` or ``not run``."""
    if point.get("skipped") or point.get("verdict") is None:
        return NOT_RUN
    return str(point["verdict"])


def sweep_verdict(report: dict[str, Any]) -> str:
    """The verdict over all sizes, as sweep schema 1.1 gives it: a 1.0 report said ``pass`` with
    sizes not run (``complete: false``); that reads ``incomplete`` here, as on the portal."""
    outcomes = [size_outcome(p) for p in report.get("points") or []]
    if "fail" in outcomes:
        return "fail"
    if NOT_RUN in outcomes or report.get("complete") is False:
        return "incomplete"
    return str(report.get("verdict") or "")


def sizes_in_words(report: dict[str, Any]) -> str:
    """``2 of 6 sizes passed, 1 failed, 3 not run``; empty where every size passed."""
    outcomes = [size_outcome(p) for p in report.get("points") or []]
    if all(outcome == "pass" for outcome in outcomes):
        return ""
    failed, not_run = outcomes.count("fail"), outcomes.count(NOT_RUN)
    words = f"{outcomes.count('pass')} of {len(outcomes)} sizes passed"
    return words + (f", {failed} failed" if failed else "") + (f", {not_run} not run" if not_run else "")


def why_not_run(report: dict[str, Any]) -> str:
    """The reason the sweep gave for its first size not run, or empty."""
    return next((str(p["skipped"]) for p in report.get("points") or [] if p.get("skipped")), "")
