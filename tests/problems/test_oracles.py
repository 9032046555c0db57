"""References compute what they claim: their gloo outputs against a single-process computation
from every rank's inputs (small preset, 4 ranks, float32 where the problem allows it). So do the
exact answers the reference side computes beside them (``evaluator/exact.py``).

The oracles live in ``tests/problems/oracles/``; all references run in one rank group.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

import problems
from evaluator.config import Limits
from evaluator.exact import load_exact
from evaluator.launcher import run_side
from problems.spec import dtype_name

from .oracles import WORLD, Inputs, all_oracles, all_skipped

# One worker runs them all under pytest -n (make test): reference_run, 15 s of gloo ranks, is
# computed once per worker that runs any of them.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("oracles-reference-run")]
SEED = 5
ORACLES = all_oracles()
# Problems whose reference cannot be run in float64, and why (the evaluator judges their floating
# outputs by the problem's tolerance, and its report says so).
NO_EXACT_ANSWER = {
    "float8-fsdp-all-gather": "it casts to float8 e4m3 on purpose: the fp8 bytes (uint8 outputs) are "
                              "judged by equality, the float32 scales by the problem's tolerance",
    "zeropp-qgz-quantized-reduce-scatter": "it quantizes gradients to int8 blocks on purpose: where a "
                                           "value rounds is part of the problem",
    "zeropp-quantized-weight-all-gather": "it quantizes weights to int8 blocks on purpose: where a value "
                                          "rounds is part of the problem",
}
# The exact answer is the reference's math without the rounding it does on purpose; the
# oracle computes that rounding too.
ROUNDS_ON_PURPOSE = {
    "muon-distributed-step": "Newton-Schulz runs in bf16 by definition; float64 runs it exactly",
}


def oracle_dtype(slug: str) -> torch.dtype:
    problem = problems.get(slug)
    return torch.float32 if torch.float32 in problem.dtypes else problem.default_dtype


@pytest.fixture(scope="module")
def reference_run() -> dict[str, list[tuple[list[torch.Tensor], list[dict]]]]:
    """Every oracle problem's reference outputs and exact-answer records, per rank, from one
    launch of WORLD gloo ranks."""
    slugs = sorted(ORACLES)
    tasks = [{"task": i, "problem": slug, "size": "small", "dtype": dtype_name(oracle_dtype(slug)),
              "trials": [{"index": 0, "seed": SEED}], "timing": None, "timing_seed": 0}
             for i, slug in enumerate(slugs)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "out").mkdir()
        job = {"side": "reference", "world_size": WORLD, "device": "cpu", "backend": "gloo",
               "solution_path": None, "out_dir": str(work / "out"), "threads": 1, "collective_timeout_s": 300, "tasks": tasks}
        result = run_side(job, work, Limits(startup_s=120, step_s=60, total_s=600), 0.0)
        assert result.ok, result.failure
        return {slug: [(torch.load(work / "out" / f"task{i}_trial0_rank{r}.pt", weights_only=True),
                        load_exact(work / "out" / f"task{i}_trial0_rank{r}.exact.pt"))
                       for r in range(WORLD)] for i, slug in enumerate(slugs)}


@pytest.fixture(scope="module")
def reference_outputs(reference_run) -> dict[str, list[list[torch.Tensor]]]:
    return {slug: [outputs for outputs, _ in ranks] for slug, ranks in reference_run.items()}


def all_inputs(slug: str) -> Inputs:
    problem = problems.get(slug)
    return [problem.make_inputs(problem.case(WORLD, "small", oracle_dtype(slug), rank=r, seed=SEED,
                                             device="cpu")) for r in range(WORLD)]


@pytest.mark.parametrize("slug", sorted(ORACLES))
def test_the_reference_matches_the_single_process_math(slug, reference_outputs):
    oracle, tol = ORACLES[slug]
    outputs = reference_outputs[slug]
    expected = oracle(all_inputs(slug))
    for rank in range(WORLD):
        assert len(outputs[rank]) == len(expected[rank]), f"rank {rank}: number of outputs"
        for index, (got, want) in enumerate(zip(outputs[rank], expected[rank])):
            assert got.shape == want.shape, (rank, index, got.shape, want.shape)
            if not want.is_floating_point():
                assert torch.equal(got, want), (rank, index)
                continue
            torch.testing.assert_close(got.double(), want.double(), atol=tol, rtol=tol,
                                       msg=lambda m: f"rank {rank} output {index}: {m}")


def test_every_problem_has_an_oracle_or_a_stated_reason():
    skipped = all_skipped()
    assert not set(skipped) & set(ORACLES), "a problem is both checked and skipped"
    assert all(len(why.split()) >= 8 for why in skipped.values()), "say why in a sentence"
    missing = sorted(p.slug for p in problems.all_problems() if p.slug not in ORACLES and p.slug not in skipped)
    assert not missing, f"no oracle and no reason for: {missing}"


@pytest.mark.parametrize("slug", sorted(ORACLES))
def test_zeros_do_not_pass_for_any_float_output(slug, reference_outputs):
    """A tolerance wider than an output's values would let a solution skip computing it."""
    from evaluator.compare import compare_output

    problem = problems.get(slug)
    tol = problem.tolerance(oracle_dtype(slug))
    outputs = reference_outputs[slug]
    for index in range(len(outputs[0])):
        per_rank = [outputs[rank][index] for rank in range(WORLD)]
        if not per_rank[0].is_floating_point():
            continue
        verdicts = [compare_output(index, torch.zeros_like(t), t, tol)["status"] for t in per_rank]
        assert any(v != "ok" for v in verdicts), f"output {index} passes as all zeros with {tol}"


def test_every_reference_runs_in_float64_except_the_listed_ones(reference_run):
    why = {slug: sorted({r["why"] for _, records in ranks for r in records if r["why"]})
           for slug, ranks in reference_run.items()}
    assert {slug for slug, reasons in why.items() if reasons} == set(NO_EXACT_ANSWER), why
    assert "float8_e4m3fn" in why["float8-fsdp-all-gather"][0]
    assert "int8" in why["zeropp-quantized-weight-all-gather"][0]


@pytest.mark.parametrize("slug", sorted(set(ORACLES) - set(ROUNDS_ON_PURPOSE)))
def test_the_exact_answer_matches_the_single_process_math(slug, reference_run):
    oracle, tol = ORACLES[slug]
    expected = oracle(all_inputs(slug))
    for rank, (outputs, records) in enumerate(reference_run[slug]):
        for index, (native, record, want) in enumerate(zip(outputs, records, expected[rank])):
            if not native.is_floating_point() or record["why"]:
                continue
            exact = native.double()
            if record["residual"] is not None:
                exact = exact + record["residual"].double()
            torch.testing.assert_close(exact, want.double(), atol=tol, rtol=tol,
                                       msg=lambda m: f"rank {rank} output {index}: {m}")


def test_every_references_outputs_fit_the_judges_output_slot(reference_run):
    """The judge reads a candidate's outputs from slots sized from the problem (judge/inputs.py)
    and refuses more before reading: an honest kernel's outputs, as large as the reference's,
    must fit with room to spare."""
    from evaluator.judge.inputs import InputMaker, output_capacity
    from evaluator.wire import HEADER_BYTES, aligned

    tight = []
    for slug, ranks in reference_run.items():
        problem = problems.get(slug)
        dtype = oracle_dtype(slug)
        maker = InputMaker(problem, WORLD, "small", dtype, ("",) * WORLD)
        call_bytes = max(maker.call_bytes(rank) for rank in range(WORLD))
        capacity = output_capacity(problem, WORLD, "small", dtype, call_bytes)
        for outputs, _ in ranks:
            needed = HEADER_BYTES + sum(aligned(t.numel() * t.element_size()) for t in outputs)
            if 2 * needed > capacity + HEADER_BYTES:
                tight.append((slug, needed, capacity))
    assert not tight, tight
