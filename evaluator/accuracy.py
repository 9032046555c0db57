"""The rule that judges a floating output against its exact answer, in the evaluating parent.

A candidate's error against the exact answer may be at most what an honest implementation at the
output's dtype makes: ``RMS_MULTIPLE`` times the NCCL reference's own error on the same inputs
(never less than the error of rounding the exact answer once to the dtype), measured as a root
mean square over the output, and no element may be off by more than ``MAX_MULTIPLE`` times the
reference's largest error. float32 outputs get ``ULP_ALLOWANCE`` ulp on top of both: honest fp32
code has no wider accumulator, so accumulation order alone moves results by a few ulp. Where the
reference is exact on every element (data movement), the candidate must be exact too.

Where a problem's answer hangs on a decision that rounding can tip (a top-p cut: is this token's
cumulative mass above 1 - p?), the exact answer is an interval per element: the exact answers
with the decision's threshold moved by what an honest implementation's rounding can move it
(``Problem.decision_band``). Errors, the candidate's and the reference's alike, are then distances
to that interval; elsewhere the interval is the one exact value and nothing changes.

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
    banded: int = 0  # elements whose exact answer is an interval (a decision within rounding)


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """16-bit values, their residuals and differences are exact enough in float32 (a residual is
    some 2^-9 of its value: their sum spans well under float32's 24 bits); wider types need float64.
    Half the bytes of float64: the judge of a 64 MiB output is a memory-bound pass."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else torch.float64


@dataclass
class Band:
    """The ends of the exact answer's interval (``low <= exact <= high`` elementwise), as
    ``exact.end_residual`` wrote them: residuals from the native output, infinities kept, the
    end's own value where the native output is not finite. None: that end is the exact answer."""

    low: Optional[torch.Tensor] = None
    high: Optional[torch.Tensor] = None


@dataclass
class _Chunk:
    got: torch.Tensor
    want: torch.Tensor  # the native reference's output
    exact: torch.Tensor
    low: torch.Tensor  # the exact interval's ends (both ``exact`` where there is no band)
    high: torch.Tensor

    def mask(self, keep: torch.Tensor) -> "_Chunk":
        exact = self.exact[keep]
        low = exact if self.low is self.exact else self.low[keep]
        high = exact if self.high is self.exact else self.high[keep]
        return _Chunk(self.got[keep], self.want[keep], exact, low, high)

    def error(self, value: torch.Tensor, banded: bool) -> torch.Tensor:
        # Without a band the interval is the exact value: one subtraction, not distance()'s
        # comparisons (the judge of a 64 MiB output is a memory-bound pass).
        return distance(value, self.low, self.high) if banded else (value - self.exact).abs()


def _chunks(got: torch.Tensor, native: torch.Tensor, residual: Optional[torch.Tensor],
            band: Optional[Band]) -> Iterator[_Chunk]:
    """Candidate, native, exact and the interval in the working dtype, real and imaginary parts
    side by side."""
    g, n = as_real(got), as_real(native)
    r = as_real(residual) if residual is not None else None
    low = as_real(band.low) if band is not None and band.low is not None else None
    high = as_real(band.high) if band is not None and band.high is not None else None
    wide = working_dtype(real_dtype(native.dtype))
    for start in range(0, n.numel(), CHUNK):
        part = slice(start, start + CHUNK)
        want = n[part].to(wide)
        exact = want + r[part].to(wide) if r is not None else want
        yield _Chunk(g[part].to(wide), want, exact,
                     band_end(want, low[part].to(wide)) if low is not None else exact,
                     band_end(want, high[part].to(wide)) if high is not None else exact)


def band_end(native: torch.Tensor, end_residual: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(native), native + end_residual, end_residual)


def distance(value: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """How far each value lies outside [low, high]: 0 inside (-inf is inside [-inf, x]), NaN for NaN."""
    zero = torch.zeros_like(value)
    outside = torch.where(value < low, low - value, torch.where(value > high, value - high, zero))
    return torch.where(torch.isnan(value), value, outside)


def judge(got: torch.Tensor, native: torch.Tensor, residual: Optional[torch.Tensor],
          band: Optional[Band] = None) -> Judgement:
    """``residual`` = exact - native (None: the native output is exact); ``band``: the exact
    interval's ends, where the problem has one. Same shape and dtype for ``got`` and ``native``,
    checked by the caller."""
    dtype = real_dtype(native.dtype)
    # A candidate that returned the native output bit for bit (a copy of the reference, NCCL's own
    # call) has the reference's errors: the second pass, which exists to measure the candidate's,
    # is skipped and the first measures them. NaN never equals itself, so outputs holding NaN take
    # the long way; so do banded outputs, whose special cases are the second pass's business.
    identical = band is None and torch.equal(got, native)
    if identical and residual is None:
        # Data movement: the native output is the exact answer, and every error is 0.
        return Judgement(True, Norms(), Norms(), {"rms": 0.0, "max_abs": 0.0}, 0, 0, 0.0, 0.0, 0)
    same = Norms()  # the candidate's errors when identical: the reference's own
    same_rel = 0.0
    reference, rounding, spacing = Norms(), Norms(), Norms()
    needs_spacing = dtype in ULP_ALLOWANCE  # the spacing only feeds the float32 allowance
    banded, native_exact = 0, True
    for chunk in _chunks(got, native, residual, band):
        if band is not None:
            banded += int((chunk.high > chunk.low).sum())
        finite = torch.isfinite(chunk.want)
        if not bool(finite.all()):  # masking copies: only where there is something to mask
            chunk = chunk.mask(finite)
        exact = chunk.exact
        own = chunk.error(chunk.want, band is not None)
        reference.add(own)
        if identical:
            ok = torch.isfinite(own)
            kept, kept_exact = (own, exact) if bool(ok.all()) else (own[ok], exact[ok])
            same.add(kept)
            if kept.numel():
                same_rel = max(same_rel, float((kept / kept_exact.abs().clamp_min(1e-12)).max()))
        if band is not None:  # without a band, the reference's own error says it
            native_exact = native_exact and bool((chunk.want == exact).all())
        rounded = exact.to(dtype).to(exact.dtype)
        rounding.add(torch.where(torch.isfinite(rounded), (rounded - exact).abs(), 0.0))
        if needs_spacing:
            spacing.add(ulp(exact.double(), dtype))
    # Data movement: the native output is the exact answer itself. (Inside a band is not enough:
    # a band can be wide enough to hold a rounded native output.)
    exact_only = native_exact if band is not None else reference.max_abs == 0.0
    allowance = 0.0 if exact_only else ULP_ALLOWANCE.get(dtype, 0.0)
    floor_rms, floor_max = max(reference.rms, rounding.rms), max(reference.max_abs, rounding.max_abs)
    allowed = {"rms": RMS_MULTIPLE * floor_rms + allowance * spacing.rms,
               "max_abs": MAX_MULTIPLE * floor_max}
    if identical:
        # Nothing is outside: each error is at most the reference's largest, which the bound
        # doubles; no special value differs; the candidate's norms are the reference's.
        return Judgement(same.rms <= allowed["rms"], same, reference, allowed, 0, 0, same_rel, allowance, banded)
    candidate = Norms()
    outside = nonfinite = 0
    max_rel = 0.0
    for chunk in _chunks(got, native, residual, band):
        g, want = chunk.got, chunk.want
        finite = torch.isfinite(want)
        # NaN/Inf where the reference has the same: a match; anywhere else: not, unless a band
        # admits it (its -inf end admits -inf).
        special = ~finite & ~((g == want) | (torch.isnan(g) & torch.isnan(want)))
        unexpected = ~torch.isfinite(g) & finite
        if band is not None:
            outside_band = ~((g >= chunk.low) & (g <= chunk.high))
            special, unexpected = special & outside_band, unexpected & outside_band
        nonfinite += int(unexpected.sum())
        if not bool(finite.all()):
            chunk = chunk.mask(finite)
        g, exact = chunk.got, chunk.exact
        err = chunk.error(g, band is not None)
        bound = allowed["max_abs"] + allowance * ulp(exact.double(), dtype) if allowance else allowed["max_abs"]
        outside += int(special.sum()) + int((~(err <= bound)).sum())
        ok = torch.isfinite(err)
        if not bool(ok.all()):
            err, exact = err[ok], exact[ok]
        candidate.add(err)
        if err.numel():
            max_rel = max(max_rel, float((err / exact.abs().clamp_min(1e-12)).max()))
    passed = nonfinite == 0 and outside == 0 and candidate.rms <= allowed["rms"]
    return Judgement(passed, candidate, reference, allowed, outside, nonfinite, max_rel, allowance, banded)
