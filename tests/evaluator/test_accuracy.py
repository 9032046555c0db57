"""The exact-answer rule on hand-made outputs: what passes, what fails, and what it reports."""

from __future__ import annotations

import pytest
import torch

from evaluator import accuracy
from evaluator.compare import compare_output, describe
from evaluator.exact import ExactRun, residual_record
from problems.spec import Tolerance

TOL = Tolerance(atol=0.25, rtol=0.02)  # the bf16 all-reduce's, loose on purpose


def ring_sum(parts: list[torch.Tensor]) -> torch.Tensor:
    """A bf16 sum rounded at every hop, as NCCL's ring and gloo make it."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def setting(ranks: int = 8, n: int = 1 << 14) -> tuple[list[torch.Tensor], torch.Tensor, dict]:
    gen = torch.Generator().manual_seed(0)
    parts = [torch.randn(n, generator=gen).to(torch.bfloat16) for _ in range(ranks)]
    exact = torch.stack([p.double() for p in parts]).sum(0)
    native = ring_sum(parts)
    record = residual_record([native], ExactRun([exact]))[0]
    return parts, native, record


def test_ulp_is_the_spacing_of_the_dtype():
    values = torch.tensor([1.0, 1.5, 2.0, -3.0, 0.0], dtype=torch.float64)
    assert accuracy.ulp(values, torch.bfloat16).tolist() == [2**-7, 2**-7, 2**-6, 2**-6, 2**-133]
    assert accuracy.ulp(values[:1], torch.float32).item() == 2**-23


def test_a_copy_of_the_reference_passes_with_its_errors_reported():
    _, native, record = setting()
    check = compare_output(0, native.clone(), native, TOL, record)
    assert check["status"] == "ok" and check["judged_against"] == "exact"
    assert check["candidate_err"] == check["reference_err"]
    assert check["rule"] == {"rms_multiple": 1.25, "max_multiple": 2.0, "ulp_allowance": 0.0}


def test_an_fp32_accumulation_passes_at_every_world_size():
    for ranks in (2, 4, 8):
        parts, native, record = setting(ranks)
        honest = torch.stack([p.float() for p in parts]).sum(0).to(torch.bfloat16)
        assert compare_output(0, honest, native, TOL, record)["status"] == "ok", ranks


def test_fp8_on_the_wire_fails_although_the_old_tolerance_took_it():
    parts, native, record = setting(ranks=2)
    wire = [p.to(torch.float8_e4m3fn).float() for p in parts]
    lossy = torch.stack(wire).sum(0).to(torch.bfloat16)
    assert compare_output(0, lossy, native, TOL)["status"] == "ok"  # judged by atol 0.25: passes
    check = compare_output(0, lossy, native, TOL, record)
    assert check["status"] == "value_mismatch"
    assert check["candidate_err"]["rms"] > 3 * check["reference_err"]["rms"]


def test_one_wrong_element_fails_and_is_counted():
    _, native, record = setting()
    wrong = native.clone()
    wrong[7] += 1.0
    check = compare_output(0, wrong, native, TOL, record)
    assert check["status"] == "value_mismatch" and check["mismatched"] == 1
    message = describe(check)
    assert message.startswith("output 0: error against the exact answer beyond what the reference makes: rms ")
    assert "(reference " in message and "1 of 16384 elements outside the allowed error" in message


def test_rounding_the_wrong_way_fails_on_the_rms_alone():
    # The reference rounds each element correctly (values in [1, 2), one ulp = 2^-7); the
    # candidate picks the other neighbour wherever the exact value is not within 0.1 ulp of one.
    gen = torch.Generator().manual_seed(2)
    u = 2**-7
    native = (1 + torch.randint(0, 128, (4096,), generator=gen) * u).to(torch.bfloat16)
    residual = ((torch.rand(4096, generator=gen) - 0.5) * u).to(torch.bfloat16)
    other_way = torch.where(residual.abs() > 0.1 * u, native.double() + u * residual.double().sign(),
                            native.double()).to(torch.bfloat16)
    check = compare_output(0, other_way, native, TOL, {"residual": residual, "why": None})
    # No element is beyond twice the reference's largest error (half an ulp)...
    assert check["mismatched"] == 0
    # ...but the rms error is twice what rounding once makes.
    assert check["status"] == "value_mismatch"
    assert check["candidate_err"]["rms"] > 2 * check["reference_err"]["rms"]


def test_where_the_reference_is_exact_the_candidate_must_be_too():
    data = torch.randn(100, dtype=torch.float32)
    record = residual_record([data], ExactRun([data.double()]))[0]
    assert record == {"residual": None, "why": None}
    off = data.clone()
    off[0] = torch.nextafter(off[0], torch.tensor(10.0))
    check = compare_output(0, off, data, Tolerance(1e-3, 1e-3), record)
    assert check["status"] == "value_mismatch" and check["allowed_err"] == {"rms": 0.0, "max_abs": 0.0}


def test_float32_outputs_get_a_few_ulp_for_another_summation_order():
    gen = torch.Generator().manual_seed(1)
    terms = torch.randn(64, 1000, generator=gen)
    exact = terms.double().sum(0)
    forward, backward = terms.sum(0), terms.flip(0).cumsum(0)[-1]
    record = residual_record([forward], ExactRun([exact]))[0]
    check = compare_output(0, backward, forward, Tolerance(0, 0), record)
    assert check["status"] == "ok" and check["rule"]["ulp_allowance"] == accuracy.ULP_ALLOWANCE[torch.float32]
    assert check["candidate_err"] != check["reference_err"]


def test_nan_where_the_exact_answer_is_finite_is_its_own_failure():
    _, native, record = setting()
    bad = native.clone()
    bad[0] = float("nan")
    assert compare_output(0, bad, native, TOL, record)["status"] == "nan_inf"


def test_special_values_the_reference_has_must_be_matched():
    native = torch.tensor([float("-inf"), 1.0, 2.0])
    record = residual_record([native], ExactRun([torch.tensor([float("-inf"), 1.0 + 1e-9, 2.0],
                                                                dtype=torch.float64)]))[0]
    assert compare_output(0, native.clone(), native, TOL, record)["status"] == "ok"
    assert compare_output(0, torch.tensor([0.0, 1.0, 2.0]), native, TOL, record)["status"] == "value_mismatch"


def test_without_an_exact_answer_the_tolerance_judges_and_the_report_says_why():
    native = torch.ones(4)
    check = compare_output(0, native + 1e-3, native, Tolerance(1e-2, 0), {"residual": None, "why": "float8 inside"})
    assert check["status"] == "ok" and check["judged_against"] == "reference"
    assert check["no_exact_answer"] == "float8 inside" and check["rule"] == {"atol": 1e-2, "rtol": 0}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_output_of_another_dtype_in_float64_has_no_exact_answer(dtype):
    native = torch.ones(3, dtype=dtype)
    record = residual_record([native], ExactRun([torch.ones(3, dtype=torch.float32)]))[0]
    assert record["residual"] is None and "forces dtype float32" in record["why"]


def passes_over(monkeypatch) -> list[int]:
    """How many times the rule walks the outputs (each pass iterates its chunks once)."""
    count = [0]
    real = accuracy._chunks

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(accuracy, "_chunks", counted)
    return count


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.complex64])
def test_a_bit_exact_copy_of_exact_data_movement_is_judged_as_the_full_rule_would(dtype, monkeypatch):
    # The shortcut for outputs equal to an exact native output must say what the two passes say.
    gen = torch.Generator().manual_seed(1)
    native = torch.randn(4096, generator=gen).to(dtype)
    if not native.is_complex():
        native[7], native[9], native[11] = float("inf"), float("-inf"), -0.0
    got = native.clone()
    if not native.is_complex():
        got[11] = 0.0  # -0.0 and 0.0 are the same value
    passes = passes_over(monkeypatch)
    quick = accuracy.judge(got, native, None)
    assert passes[0] == 0  # one comparison, no pass
    monkeypatch.setattr(accuracy.torch, "equal", lambda a, b: False)
    full = accuracy.judge(got, native, None)
    assert quick.passed and full.passed
    assert (quick.candidate.as_dict(), quick.reference.as_dict(), quick.allowed, quick.outside, quick.nonfinite,
            quick.max_rel, quick.ulp_allowance, quick.banded) == \
        (full.candidate.as_dict(), full.reference.as_dict(), full.allowed, full.outside, full.nonfinite,
         full.max_rel, full.ulp_allowance, full.banded)


def test_the_shortcut_never_passes_what_differs_or_holds_nan():
    native = torch.arange(64, dtype=torch.float32).to(torch.bfloat16)
    wrong = native.clone()
    wrong[3] += 1
    assert not accuracy.judge(wrong, native, None).passed
    with_nan = native.clone()
    with_nan[5] = float("nan")
    # NaN where the exact answer has NaN too is a match, but it is found by the full rule.
    assert accuracy.judge(with_nan.clone(), with_nan, None).passed
    assert not accuracy.judge(with_nan, native, None).passed


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_bit_exact_copy_of_a_rounded_reduction_is_judged_as_the_full_rule_would(dtype, monkeypatch):
    gen = torch.Generator().manual_seed(2)
    parts = [torch.randn(1 << 13, generator=gen).to(dtype) for _ in range(8)]
    exact = torch.stack([p.double() for p in parts]).sum(0)
    native = ring_sum(parts)
    native[5] = float("inf")  # a special value both have
    exact[5] = float("inf")
    residual = residual_record([native], ExactRun([exact]))[0]["residual"]
    assert residual is not None
    passes = passes_over(monkeypatch)
    quick = accuracy.judge(native.clone(), native, residual)
    assert passes[0] == 1
    monkeypatch.setattr(accuracy.torch, "equal", lambda a, b: False)
    full = accuracy.judge(native.clone(), native, residual)
    assert passes[0] == 3
    assert quick.passed and full.passed and quick.reference.rms > 0
    assert (quick.candidate.as_dict(), quick.reference.as_dict(), quick.allowed, quick.outside, quick.nonfinite,
            quick.ulp_allowance, quick.banded) == \
        (full.candidate.as_dict(), full.reference.as_dict(), full.allowed, full.outside, full.nonfinite,
         full.ulp_allowance, full.banded)
    assert quick.max_rel == pytest.approx(full.max_rel, rel=1e-12)
