"""Judging one rank's outputs against the reference's, in the evaluating parent."""

from __future__ import annotations

import torch

from problems.spec import Tolerance, dtype_name

from .report import FailureClass, OutputCheck

CHUNK = 1 << 24  # elements compared at a time, to bound the parent's memory


def _dtype(t: torch.Tensor) -> str:
    try:
        return dtype_name(t.dtype)
    except ValueError:
        return str(t.dtype).removeprefix("torch.")


def _check(index: int, status: FailureClass | None, got: torch.Tensor, want: torch.Tensor,
           abs_err: float | None = None, rel_err: float | None = None, mismatched: int = 0) -> OutputCheck:
    return OutputCheck(index=index, status=status.value if status else "ok",
                       shape=list(got.shape), expected_shape=list(want.shape),
                       dtype=_dtype(got), expected_dtype=_dtype(want),
                       max_abs_err=abs_err, max_rel_err=rel_err, mismatched=mismatched,
                       numel=want.numel())


def compare_output(index: int, got: torch.Tensor, want: torch.Tensor, tol: Tolerance) -> OutputCheck:
    if got.shape != want.shape:
        return _check(index, FailureClass.SHAPE_MISMATCH, got, want)
    if got.dtype != want.dtype:
        return _check(index, FailureClass.DTYPE_MISMATCH, got, want)
    if not want.is_floating_point():
        mismatched = int((got != want).sum())
        return _check(index, FailureClass.VALUE_MISMATCH if mismatched else None, got, want,
                      float(mismatched > 0), float(mismatched > 0), mismatched)
    got_flat, want_flat = got.reshape(-1), want.reshape(-1)
    # 16-bit values and their differences are exact in float32; wider types need float64.
    wide = torch.float64 if want.dtype in (torch.float32, torch.float64) else torch.float32
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
    return _check(index, status, got, want, max_abs, max_rel, mismatched)


def compare_outputs(got: list[torch.Tensor], want: list[torch.Tensor], tol: Tolerance) -> list[OutputCheck]:
    if len(got) != len(want):
        return [OutputCheck(index=-1, status=FailureClass.SHAPE_MISMATCH.value, shape=[len(got)],
                            expected_shape=[len(want)], dtype="", expected_dtype="",
                            max_abs_err=None, max_rel_err=None, mismatched=0, numel=len(want))]
    return [compare_output(i, g, w, tol) for i, (g, w) in enumerate(zip(got, want))]


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
    return (f"{head}: {check['mismatched']} of {check['numel']} elements outside tolerance "
            f"(max abs err {check['max_abs_err']:.3g}, max rel err {check['max_rel_err']:.3g})")
