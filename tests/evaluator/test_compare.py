"""Judging outputs: tolerances, special values, integers and the one-line descriptions."""

from __future__ import annotations

import torch

from evaluator.compare import compare_output, compare_outputs, describe
from problems.spec import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-2)


def test_it_accepts_values_inside_atol_plus_rtol():
    want = torch.tensor([0.0, 1.0, -100.0])
    got = want + torch.tensor([9e-4, 1.0e-2, -1.0])
    check = compare_output(0, got, want, TOL)
    assert check["status"] == "ok" and check["mismatched"] == 0
    assert check["max_abs_err"] == 1.0


def test_it_counts_elements_outside_tolerance():
    want = torch.zeros(10)
    got = want.clone()
    got[3] = 0.5
    check = compare_output(2, got, want, TOL)
    assert check["status"] == "value_mismatch" and check["mismatched"] == 1
    assert describe(check).startswith("output 2: 1 of 10 elements outside tolerance (max abs err 0.5")


def test_nan_where_the_reference_is_finite_is_its_own_failure():
    want = torch.ones(4)
    got = torch.tensor([1.0, float("nan"), 1.0, float("inf")])
    check = compare_output(0, got, want, TOL)
    assert check["status"] == "nan_inf" and check["mismatched"] == 2


def test_special_values_that_match_the_reference_pass():
    want = torch.tensor([float("-inf"), float("nan"), 2.0])
    check = compare_output(0, want.clone(), want, TOL)
    assert check["status"] == "ok"


def test_integers_must_match_exactly():
    want = torch.arange(6)
    got = want.clone()
    got[5] = 4
    check = compare_output(0, got, want, Tolerance(atol=10, rtol=10))
    assert check["status"] == "value_mismatch" and check["mismatched"] == 1


def test_bf16_is_compared_without_losing_its_values():
    want = torch.randn(1000, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    assert compare_output(0, want.clone(), want, Tolerance(0.0, 0.0))["status"] == "ok"


def test_shape_dtype_and_count_mismatches_are_named():
    want = torch.zeros(4)
    assert compare_output(0, torch.zeros(5), want, TOL)["status"] == "shape_mismatch"
    assert compare_output(0, torch.zeros(4, dtype=torch.float64), want, TOL)["status"] == "dtype_mismatch"
    checks = compare_outputs([want, want], [want], TOL)
    assert checks[0]["status"] == "shape_mismatch"
    assert describe(checks[0]) == "returned 2 outputs, the reference returns 1"



def test_outputs_and_exact_records_move_whole_to_the_comparison_device():
    """The parent judges a GPU run's outputs on the rank's GPU where it sees one
    (api.Evaluation.comparison_device); what moves there is every tensor of the outputs and of the
    exact records, the rest as it was."""
    from evaluator.api import on_device

    records = [{"residual": torch.ones(3, dtype=torch.float64), "why": None, "low": None}, None]
    moved = on_device(records, torch.device("meta"))
    assert moved[0]["residual"].device.type == "meta" and moved[0]["residual"].dtype == torch.float64
    assert moved[0]["why"] is None and moved[0]["low"] is None and moved[1] is None
    outputs = on_device([torch.zeros(2), torch.arange(4)], torch.device("meta"))
    assert [t.device.type for t in outputs] == ["meta", "meta"] and outputs[1].dtype == torch.int64
