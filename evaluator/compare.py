"""Judging one rank's outputs, in the evaluating parent.

A floating output with an exact answer (``evaluator.exact``, computed by the reference side) is
judged by ``accuracy.judge``: its error against the exact answer beside the reference's own.
Integer and bool outputs must equal the reference's. A floating output without an exact answer
falls back to the problem's per-dtype tolerance against the reference's output.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Optional

import torch

from problems.spec import Tolerance, dtype_name

from . import accuracy
from .report import FailureClass, OutputCheck

CHUNK = accuracy.CHUNK  # elements compared at a time, to bound the parent's memory

ExactRecord = dict[str, Any]  # {"residual": Tensor or None, "why": str or None}, from evaluator.exact


def _dtype(t: torch.Tensor) -> str:
    try:
        return dtype_name(t.dtype)
    except ValueError:
        return str(t.dtype).removeprefix("torch.")


def _check(index: int, status: FailureClass | None, got: torch.Tensor, want: torch.Tensor,
           abs_err: float | None = None, rel_err: float | None = None, mismatched: int = 0,
           **judged: Any) -> OutputCheck:
    check = OutputCheck(index=index, status=status.value if status else "ok",
                        shape=list(got.shape), expected_shape=list(want.shape),
                        dtype=_dtype(got), expected_dtype=_dtype(want),
                        max_abs_err=abs_err, max_rel_err=rel_err, mismatched=mismatched,
                        numel=want.numel(), judged_against="reference", candidate_err=None,
                        reference_err=None, allowed_err=None, rule=None, no_exact_answer=None)
    check.update(judged)  # type: ignore[typeddict-item]
    for key in ("max_abs_err", "max_rel_err"):
        check[key] = _reportable(check[key])  # type: ignore[literal-required]
    for key in ("candidate_err", "reference_err", "allowed_err"):
        if isinstance(norms := check.get(key), dict):
            check[key] = {name: _reportable(value) for name, value in norms.items()}  # type: ignore[literal-required]
    return check


def _reportable(value: Any) -> Any:
    """An error as the report can carry it: finite. A candidate's bfloat16 outputs near the
    dtype's largest value have errors whose squares (summed in float32) and ratios to the exact
    answer overflow: the report held Infinity, which is not JSON (the portal's database refuses
    it), so the failing candidate's result could not be stored (red team, returns_huge_values).
    Past the largest float, an error reads as the largest float; the verdict is decided before."""
    if isinstance(value, float) and not math.isfinite(value):
        return -sys.float_info.max if value < 0 else sys.float_info.max
    return value


def compare_output(index: int, got: torch.Tensor, want: torch.Tensor, tol: Tolerance,
                   exact: Optional[ExactRecord] = None) -> OutputCheck:
    if got.shape != want.shape:
        return _check(index, FailureClass.SHAPE_MISMATCH, got, want)
    if got.dtype != want.dtype:
        return _check(index, FailureClass.DTYPE_MISMATCH, got, want)
    if not (want.is_floating_point() or want.is_complex()):
        mismatched = int((got != want).sum())
        return _check(index, FailureClass.VALUE_MISMATCH if mismatched else None, got, want,
                      float(mismatched > 0), float(mismatched > 0), mismatched,
                      rule={"atol": 0.0, "rtol": 0.0})
    if exact is not None and exact.get("why") is None and accuracy.judges(want.dtype):
        band = accuracy.Band(exact.get("low"), exact.get("high")) if "low" in exact else None
        return _against_exact(index, got, want, exact.get("residual"), band)
    why = (exact.get("why") or f"no exact rule for {want.dtype}") if exact is not None \
        else "the reference side computed no exact answer"
    return _against_tolerance(index, got, want, tol, why)


def _against_exact(index: int, got: torch.Tensor, want: torch.Tensor,
                   residual: Optional[torch.Tensor], band: Optional[accuracy.Band] = None) -> OutputCheck:
    ends = [band.low, band.high] if band is not None else []
    for what, tensor in [("exact residual", residual)] + [("decision band end", end) for end in ends]:
        if tensor is not None and tensor.shape != want.shape:
            raise ValueError(f"output {index}: {what} of shape {tuple(tensor.shape)} "
                             f"for an output of shape {tuple(want.shape)}")
    j = accuracy.judge(got, want, residual, band)
    rule = {"rms_multiple": accuracy.RMS_MULTIPLE, "max_multiple": accuracy.MAX_MULTIPLE,
            "ulp_allowance": j.ulp_allowance}
    if band is not None:
        rule["decision_band_elements"] = j.banded
    status = None if j.passed else FailureClass.NAN_INF if j.nonfinite else FailureClass.VALUE_MISMATCH
    return _check(index, status, got, want, j.candidate.max_abs, j.max_rel, j.outside,
                  judged_against="exact", candidate_err=j.candidate.as_dict(),
                  reference_err=j.reference.as_dict(), allowed_err=dict(j.allowed), rule=rule)


def _against_tolerance(index: int, got: torch.Tensor, want: torch.Tensor, tol: Tolerance,
                       why: str) -> OutputCheck:
    got_flat, want_flat = accuracy.as_real(got), accuracy.as_real(want)
    # 16-bit values and their differences are exact in float32; wider types need float64.
    wide = torch.float64 if want_flat.dtype in (torch.float32, torch.float64) else torch.float32
    max_abs = max_rel = 0.0
    mismatched = nonfinite = 0
    for start in range(0, want_flat.numel(), CHUNK):
        g = got_flat[start:start + CHUNK].to(wide)
        w = want_flat[start:start + CHUNK].to(wide)
        finite = torch.isfinite(w)
        # NaN/Inf where the reference has them too is a match; anywhere else it is not.
        same_special = (~finite) & ((g == w) | (torch.isnan(g) & torch.isnan(w)))
        nonfinite += int((~torch.isfinite(g) & finite).sum())
        diff = (g - w).abs()
        bad = (diff > tol.atol + tol.rtol * w.abs()) | ~torch.isfinite(diff)
        bad &= ~same_special
        mismatched += int(bad.sum())
        both = finite & torch.isfinite(g)
        if both.any():
            d = diff[both]
            max_abs = max(max_abs, float(d.max()))
            max_rel = max(max_rel, float((d / w[both].abs().clamp_min(1e-12)).max()))
    if nonfinite:
        status: FailureClass | None = FailureClass.NAN_INF
    else:
        status = FailureClass.VALUE_MISMATCH if mismatched else None
    return _check(index, status, got, want, max_abs, max_rel, mismatched,
                  rule={"atol": tol.atol, "rtol": tol.rtol}, no_exact_answer=why)


def compare_outputs(got: list[torch.Tensor], want: list[torch.Tensor], tol: Tolerance,
                    exact: Optional[list[ExactRecord]] = None) -> list[OutputCheck]:
    if len(got) != len(want):
        check = _check(-1, FailureClass.SHAPE_MISMATCH, torch.empty(0), torch.empty(0))
        check.update(shape=[len(got)], expected_shape=[len(want)], dtype="", expected_dtype="",
                     numel=len(want))
        return [check]
    records: list[Optional[ExactRecord]] = list(exact) if exact is not None and len(exact) == len(want) \
        else [None] * len(want)
    return [compare_output(i, g, w, tol, e) for i, (g, w, e) in enumerate(zip(got, want, records))]


def describe(check: OutputCheck) -> str:
    """One line that says what was wrong with an output."""
    status = check["status"]
    if check["index"] == -1:
        return f"returned {check['shape'][0]} outputs, the reference returns {check['expected_shape'][0]}"
    head = f"output {check['index']}"
    if status == FailureClass.SHAPE_MISMATCH.value:
        return f"{head} has shape {tuple(check['shape'])}, expected {tuple(check['expected_shape'])}"
    if status == FailureClass.DTYPE_MISMATCH.value:
        return f"{head} has dtype {check['dtype']}, expected {check['expected_dtype']}"
    if status == FailureClass.NAN_INF.value:
        return f"{head} has NaN or Inf where the reference is finite"
    if check.get("judged_against") == "exact":
        cand, ref, allowed = check["candidate_err"], check["reference_err"], check["allowed_err"]
        assert cand is not None and ref is not None and allowed is not None
        return (f"{head}: error against the exact answer beyond what the reference makes: "
                f"rms {cand['rms']:.3g} (reference {ref['rms']:.3g}, allowed {allowed['rms']:.3g}), "
                f"max abs {cand['max_abs']:.3g} (reference {ref['max_abs']:.3g}, allowed "
                f"{allowed['max_abs']:.3g}); {check['mismatched']} of {check['numel']} elements "
                "outside the allowed error")
    return (f"{head}: {check['mismatched']} of {check['numel']} elements outside tolerance "
            f"(max abs err {check['max_abs_err']:.3g}, max rel err {check['max_rel_err']:.3g})")
