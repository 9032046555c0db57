"""The portal's one reader of the evaluator's report (evaluator/report.py).

Reports are checked against evaluator/report.schema.json where workers hand them in
(``schema_error``); stored ones may be older (schema 1.0 to 1.2: no interval, rounds, stop or
clocks in ``timing``), so every reader here tolerates missing keys. The rest of the portal reads
reports through these functions only.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from evaluator.config import MIN_INTERVAL_ROUNDS


@dataclass(frozen=True)
class Summary:
    verdict: str  # "pass", "fail" or "" when unknown
    failure_class: str
    failure_message: str
    speedup: float | None
    speedup_low: float | None  # the interval of the speedup (schema 1.3); None before
    speedup_high: float | None
    stop_reason: str  # why the timing stopped: converged, time_cap, round_cap; "" before 1.3
    clocks_moved: bool
    candidate_ms: float | None
    reference_ms: float | None
    roofline_fraction: float | None
    reference_roofline_fraction: float | None
    roofline_ms: float | None
    device: str


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def summarize(report: Mapping[str, Any]) -> Summary:
    verdict = report.get("verdict") if report.get("verdict") in ("pass", "fail") else ""
    failure = report.get("failure") or {}
    span = interval(report)
    return Summary(
        verdict=str(verdict),
        failure_class=str(_get(failure, "failure_class") or ""),
        failure_message=str(_get(failure, "message") or "")[:2000],
        speedup=_num(_get(report, "timing", "speedup")),
        speedup_low=span.low if span else None,
        speedup_high=span.high if span else None,
        stop_reason=span.stop_reason if span else "",
        clocks_moved=clocks_moved(report),
        candidate_ms=_num(_get(report, "timing", "candidate", "median_ms")),
        reference_ms=_num(_get(report, "timing", "reference", "median_ms")),
        roofline_fraction=_num(_get(report, "timing", "candidate", "roofline_fraction")),
        reference_roofline_fraction=_num(_get(report, "timing", "reference", "roofline_fraction")),
        roofline_ms=_num(_get(report, "timing", "roofline", "time_ms")),
        device=str(_get(report, "setting", "device") or _get(report, "timing", "device") or ""),
    )


STOP_REASONS = {"converged": "the interval converged", "time_cap": "the time cap was reached",
                "round_cap": "the round cap was reached"}


@dataclass(frozen=True)
class Interval:
    """The speedup's interval and how the timing got it (schema 1.3 ``timing``)."""

    low: float
    high: float
    level: float | None
    method: str
    rounds: int | None
    stop_reason: str
    seconds: float | None

    @property
    def too_few_rounds(self) -> bool:
        """Timed over fewer rounds than a 95% interval needs (evaluator/config.py
        MIN_INTERVAL_ROUNDS; the time cap stops slow rounds early): the report's ends are then
        the rounds' own spread, shown as "no interval", never in brackets. Unknown rounds: no."""
        return self.rounds is not None and self.rounds < MIN_INTERVAL_ROUNDS

    @property
    def note(self) -> str:
        """What the interval is, in one line (for tooltips)."""
        if self.too_few_rounds:
            return too_few_rounds_note(self.rounds or 0, self.low)
        level = f"{self.level:.0%} " if self.level is not None else ""
        method = f" ({self.method})" if self.method else ""
        over = f" over {self.rounds} alternating rounds" if self.rounds else ""
        after = f" after {self.seconds:.1f} s" if self.seconds is not None else ""
        why = STOP_REASONS.get(self.stop_reason, self.stop_reason)
        stopped = f"; stopped{after}: {why}" if why else ""
        return (f"{level}interval {self.low:.3f}-{self.high:.3f}{method}{over}{stopped}. fast_p "
                f"counts it faster than p only for p < {self.low:.3f}.")


def too_few_rounds_note(rounds: int, low: float | None) -> str:
    plural = "round" if rounds == 1 else "rounds"
    credit = (f" fast_p counts it faster than p only for p < {low:.3f}, the lower end the report "
              "gives." if low is not None else "")
    return (f"No interval: timed over {rounds} alternating {plural}, fewer than the "
            f"{MIN_INTERVAL_ROUNDS} a 95% interval needs.{credit}")


POINT_NOTE = ("Point estimate: this report (schema 1.2 or older) has no interval; fast_p counts "
              "it by this speedup.")


def interval(report: Any) -> Interval | None:
    """The speedup's interval, or None where the report has none (before schema 1.3)."""
    low = _num(_get(report, "timing", "interval", "low"))
    high = _num(_get(report, "timing", "interval", "high"))
    if low is None or high is None:
        return None
    stop = mapping(report, "timing", "stop")
    n = _num(stop.get("rounds"))
    return Interval(low=low, high=high, level=_num(_get(report, "timing", "interval", "level")),
                    method=text(report, "timing", "interval", "method"),
                    rounds=int(n) if n is not None else (len(rounds(report)) or None),
                    stop_reason=str(stop.get("reason") or ""), seconds=_num(stop.get("seconds")))


def rounds(report: Any) -> list[dict[str, float | None]]:
    """``[{candidate_ms, reference_ms, ratio}]`` per alternating round, in order; [] before 1.3."""
    value = _get(report, "timing", "rounds")
    if not isinstance(value, list):
        return []
    return [{k: _num(r.get(k)) for k in ("candidate_ms", "reference_ms", "ratio")}
            for r in value if isinstance(r, Mapping)]


def clocks_moved(report: Any) -> bool:
    """Only an explicit true counts: reports before 1.3, and hosts that cannot read clocks, say null."""
    return _get(report, "timing", "clocks", "moved") is True


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    import evaluator

    schema = json.loads((Path(evaluator.__file__).parent / "report.schema.json").read_text())
    return Draft202012Validator(schema)


def schema_error(report: Any) -> str | None:
    """Where ``report`` breaks evaluator/report.schema.json, in one line; None when it does not."""
    error = next(iter(sorted(_validator().iter_errors(report), key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
    return f"{where}: {error.message[:300]}"


# What in a report quotes the candidate's source: a traceback and a compiler's log show the lines
# they pass through, and stacks and stderr are the candidate's own. They go where the source goes
# (Submission.visible_source_to); anyone else reads this in their place (the rest stays public).
HIDDEN = "(hidden: it quotes the submission's source, which only its owner and staff see)"


def without_source_quotes(report: Any) -> Any:
    """``report`` with its failure's traceback, compiler output, stacks and stderr hidden."""
    failure = report.get("failure") if isinstance(report, Mapping) else None
    if not isinstance(failure, Mapping):
        return report
    failure = dict(failure)
    for key in ("traceback", "compiler_output"):
        if failure.get(key):
            failure[key] = HIDDEN
    for key in ("stacks", "stderr"):
        if isinstance(failure.get(key), Mapping):
            failure[key] = {rank: HIDDEN for rank in failure[key]}
    return {**report, "failure": failure}


def sweep_without_source_quotes(sweep: Any) -> Any:
    """A sweep report (portal/lib/sweeps.py) with each size's report as ``without_source_quotes``."""
    points = sweep.get("points") if isinstance(sweep, Mapping) else None
    if not isinstance(points, list):
        return sweep
    return {**sweep, "points": [{**p, "report": without_source_quotes(p.get("report"))}
                                if isinstance(p, Mapping) else p for p in points]}


def mapping(report: Any, *path: str) -> dict[str, Any]:
    """The object at ``path`` (``"setting"``, ``"timing", "reference"``), or {} where there is none."""
    value = _get(report, *path)
    return dict(value) if isinstance(value, Mapping) else {}


def text(report: Any, *path: str) -> str:
    value = _get(report, *path)
    return str(value) if value is not None else ""


def side_timing(report: Any, side: str) -> dict[str, Any]:
    """``{median_ms, p10_ms, p90_ms, roofline_fraction, ...}`` of ``side`` (candidate, reference)."""
    return mapping(report, "timing", side)


def trials(report: Any) -> list[dict[str, Any]]:
    value = _get(report, "trials")
    return [dict(t) for t in value if isinstance(t, Mapping)] if isinstance(value, list) else []


def ran_unconfined(report: Any) -> bool:
    """Only an explicit "off" counts: reports before schema 1.2 say nothing about confinement."""
    return _get(report, "sandbox") == "off"


def looks_like_report(data: Any) -> bool:
    # A sweep report (portal/lib/sweeps.py) has a verdict and a problem too, and is not one.
    return (isinstance(data, Mapping) and "verdict" in data and isinstance(data.get("problem"), Mapping)
            and data.get("schema") != "pkb-sweep")


# A lone UTF-16 surrogate: JSON may carry one ("\ud800", as json.dumps writes a candidate's
# `raise RuntimeError("\ud800")`) but it is no character, and UTF-8 (PostgreSQL) cannot hold it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_nul(value: Any) -> Any:
    """``value`` (JSON: dicts, lists, strings, numbers) with every U+0000 and every lone
    surrogate in its strings and keys replaced by U+FFFD, which PostgreSQL can store."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd"))
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_nul(item) for item in value]
    return value
