"""The rule that judges a floating output against its exact answer, in the evaluating parent.

A candidate's error against the exact answer may be at most what an honest implementation at the
output's dtype makes: ``RMS_MULTIPLE`` times the NCCL reference's own error on the same inputs
(never less than the error of rounding the exact answer once to the dtype), measured as a root
mean square over the output, and no element may be off by more than ``MAX_MULTIPLE`` times the
reference's largest error. float32 outputs get ``ULP_ALLOWANCE`` ulp on top of both: honest fp32
code has no wider accumulator, so accumulation order alone moves results by a few ulp. Where the
reference is exact on every element (data movement), the candidate must be exact too.

docs/evaluator.md ("How correctness is judged") gives the calibration and the command behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Optional

import torch

RMS_MULTIPLE = 1.25
MAX_MULTIPLE = 2.0
ULP_ALLOWANCE = {torch.float32: 8.0, torch.float64: 8.0}  # 16-bit outputs: 0
CHUNK = 1 << 24  # elements judged at a time, to bound the parent's memory

_MANTISSA = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23, torch.float64: 52}
_MIN_EXPONENT = {torch.bfloat16: -126, torch.float16: -14, torch.float32: -126, torch.float64: -1022}


def ulp(exact: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype`` at each value of ``exact`` (float64), subnormals included."""
    bits, low = _MANTISSA[dtype], _MIN_EXPONENT[dtype]
    _, exponent = torch.frexp(exact.abs())
    exponent = torch.where(exact == 0, torch.full_like(exponent, low + 1), exponent)
    return torch.ldexp(torch.ones_like(exact), (exponent - 1).clamp_min(low) - bits)


def judges(dtype: torch.dtype) -> bool:
    """Whether the rule knows the dtype's spacing (float8 outputs fall back to the tolerance)."""
    return real_dtype(dtype) in _MANTISSA


def real_dtype(dtype: torch.dtype) -> torch.dtype:
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)


def as_real(t: torch.Tensor) -> torch.Tensor:
    """Complex outputs are judged as their real and imaginary parts."""
    return torch.view_as_real(t).reshape(-1) if t.is_complex() else t.reshape(-1)


@dataclass
class Norms:
    """An error's largest element and root mean square, over the finite elements."""

    max_abs: float = 0.0
    squares: float = 0.0
    count: int = 0

    def add(self, err: torch.Tensor) -> None:
        if err.numel():
            self.max_abs = max(self.max_abs, float(err.max()))
            flat = err.reshape(-1)
            # A dot product: one fused pass (a float64 sum of squares made a copy and was the
            # judge's slowest step); float32 accumulation is far finer than the 1.25x the rule uses.
            self.squares += float(torch.dot(flat, flat))
            self.count += err.numel()

    @property
    def rms(self) -> float:
        return math.sqrt(self.squares / self.count) if self.count else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"max_abs": self.max_abs, "rms": self.rms}


@dataclass
class Judgement:
    passed: bool
    candidate: Norms
    reference: Norms
    allowed: dict[str, float]  # rms, max_abs (the latter before a float32 element's ulp allowance)
    outside: int  # elements beyond the per-element bound, special values that differ included
    nonfinite: int  # NaN/Inf where the reference is finite
    max_rel: float
    ulp_allowance: float


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """16-bit values, their residuals and differences are exact enough in float32 (a residual is
    some 2^-9 of its value: their sum spans well under float32's 24 bits); wider types need float64.
    Half the bytes of float64: the judge of a 64 MiB output is a memory-bound pass."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else torch.float64


def _chunks(got: torch.Tensor, native: torch.Tensor,
            residual: Optional[torch.Tensor]) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(candidate, native, exact) in the working dtype, real and imaginary parts side by side."""
    g, n = as_real(got), as_real(native)
    r = as_real(residual) if residual is not None else None
    wide = working_dtype(real_dtype(native.dtype))
    for start in range(0, n.numel(), CHUNK):
        want = n[start:start + CHUNK].to(wide)
        exact = want + r[start:start + CHUNK].to(wide) if r is not None else want
        yield g[start:start + CHUNK].to(wide), want, exact


def judge(got: torch.Tensor, native: torch.Tensor, residual: Optional[torch.Tensor]) -> Judgement:
    """``residual`` = exact - native (None: the native output is exact). Same shape and dtype
    for ``got`` and ``native``, checked by the caller."""
    dtype = real_dtype(native.dtype)
    reference, rounding, spacing = Norms(), Norms(), Norms()
    needs_spacing = dtype in ULP_ALLOWANCE  # the spacing only feeds the float32 allowance
    for _, want, exact in _chunks(got, native, residual):
        finite = torch.isfinite(want)
        if not bool(finite.all()):  # masking copies: only where there is something to mask
            exact, want = exact[finite], want[finite]
        reference.add((want - exact).abs())
        rounded = exact.to(dtype).to(exact.dtype)
        rounding.add(torch.where(torch.isfinite(rounded), (rounded - exact).abs(), 0.0))
        if needs_spacing:
            spacing.add(ulp(exact.double(), dtype))
    exact_only = reference.max_abs == 0.0
    allowance = 0.0 if exact_only else ULP_ALLOWANCE.get(dtype, 0.0)
    floor_rms, floor_max = max(reference.rms, rounding.rms), max(reference.max_abs, rounding.max_abs)
    allowed = {"rms": RMS_MULTIPLE * floor_rms + allowance * spacing.rms,
               "max_abs": MAX_MULTIPLE * floor_max}
    candidate = Norms()
    outside = nonfinite = 0
    max_rel = 0.0
    for g, want, exact in _chunks(got, native, residual):
        finite = torch.isfinite(want)
        # NaN/Inf where the reference has the same: a match; anywhere else: not.
        special = ~finite & ~((g == want) | (torch.isnan(g) & torch.isnan(want)))
        nonfinite += int((~torch.isfinite(g) & finite).sum())
        if not bool(finite.all()):
            g, exact = g[finite], exact[finite]
        err = (g - exact).abs()
        bound = allowed["max_abs"] + allowance * ulp(exact.double(), dtype) if allowance else allowed["max_abs"]
        outside += int(special.sum()) + int((~(err <= bound)).sum())
        ok = torch.isfinite(err)
        if not bool(ok.all()):
            err, exact = err[ok], exact[ok]
        candidate.add(err)
        if err.numel():
            max_rel = max(max_rel, float((err / exact.abs().clamp_min(1e-12)).max()))
    passed = nonfinite == 0 and outside == 0 and candidate.rms <= allowed["rms"]
    return Judgement(passed, candidate, reference, allowed, outside, nonfinite, max_rel, allowance)
