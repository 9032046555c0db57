"""The portal's one reader of the evaluator's report (evaluator/report.py).

Reports are checked against evaluator/report.schema.json where workers hand them in
(``schema_error``); stored ones may be older (schema 1.0, 1.1), so every reader here tolerates
missing keys. The rest of the portal reads reports through these functions only.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping


@dataclass(frozen=True)
class Summary:
    verdict: str  # "pass", "fail" or "" when unknown
    failure_class: str
    failure_message: str
    speedup: float | None
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
    return Summary(
        verdict=str(verdict),
        failure_class=str(_get(failure, "failure_class") or ""),
        failure_message=str(_get(failure, "message") or "")[:2000],
        speedup=_num(_get(report, "timing", "speedup")),
        candidate_ms=_num(_get(report, "timing", "candidate", "median_ms")),
        reference_ms=_num(_get(report, "timing", "reference", "median_ms")),
        roofline_fraction=_num(_get(report, "timing", "candidate", "roofline_fraction")),
        reference_roofline_fraction=_num(_get(report, "timing", "reference", "roofline_fraction")),
        roofline_ms=_num(_get(report, "timing", "roofline", "time_ms")),
        device=str(_get(report, "setting", "device") or _get(report, "timing", "device") or ""),
    )


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
    return isinstance(data, Mapping) and "verdict" in data and isinstance(data.get("problem"), Mapping)
