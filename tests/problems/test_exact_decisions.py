"""Decisions a reference makes from computed values must not hang on rounding: where they would,
the reference makes them exactly, so that its float64 exact answer takes the same decision and
the judge stays strict (docs/evaluator.md, "Decisions within rounding"; the top-p cut, which
cannot be made exact, has a decision band instead: tests/evaluator/test_decision_band.py)."""

from __future__ import annotations

from typing import Any

import torch

import problems
from evaluator.compare import compare_output
from evaluator.exact import exact_outputs, residual_record

# A float32 uniform whose product with the degree rounds up to an integer in float32.
U, DEGREE = 0.9677419066429138, 31


def test_the_case_is_real_float32_rounds_the_product_up_to_the_next_slot():
    u = torch.tensor([U], dtype=torch.float32)
    assert int((u * DEGREE).to(torch.int64)) == DEGREE - 1  # float32: 30.0
    assert int((u.double() * DEGREE).to(torch.int64)) == DEGREE - 2  # exact: 29.99999...


def test_neighbour_sampling_draws_the_exact_slot_and_its_weights_stay_strictly_judged(one_rank):
    problem = problems.get("gnn-distributed-neighbor-sampling")
    max_degree = 32
    adj = torch.arange(max_degree, dtype=torch.int64).repeat(2, 1)  # node 0 and 1, neighbour = slot
    inputs = {"adj": adj, "degree": torch.tensor([DEGREE, 5]),
              "edge_weight": torch.linspace(0.0, 1.0, max_degree).repeat(2, 1),
              "seeds": torch.tensor([0]), "uniforms": torch.tensor([[U]], dtype=torch.float32)}

    def call(given: dict[str, Any]) -> Any:
        return problem.reference(**given, group=one_rank)

    nbrs, wts = call(inputs)
    assert int(nbrs[0, 0]) == DEGREE - 2
    # The float64 exact answer draws the same edge: the weight is data movement, judged exactly.
    records = residual_record([nbrs, wts], exact_outputs(call, inputs))
    assert records[1]["residual"] is None and records[1]["why"] is None
    tol = problem.tolerance(torch.float32)
    assert compare_output(1, wts, wts, tol, records[1])["status"] == "ok"
    # The neighbouring slot's weight, which a float32 product would draw, is a mismatch.
    wrong = inputs["edge_weight"][0, DEGREE - 1].reshape(1, 1)
    assert compare_output(1, wrong, wts, tol, records[1])["status"] == "value_mismatch"
