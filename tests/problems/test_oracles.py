"""References compute what they claim: their gloo outputs against a single-process computation
from every rank's inputs (small preset, 4 ranks, float32 where the problem allows it).

The oracles live in ``tests/problems/oracles/``; all references run in one rank group.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

import problems
from evaluator.config import Limits
from evaluator.launcher import run_side
from problems.spec import dtype_name

from .oracles import WORLD, Inputs, all_oracles, all_skipped

pytestmark = pytest.mark.slow
SEED = 5
ORACLES = all_oracles()


def oracle_dtype(slug: str) -> torch.dtype:
    problem = problems.get(slug)
    return torch.float32 if torch.float32 in problem.dtypes else problem.default_dtype


@pytest.fixture(scope="module")
def reference_outputs() -> dict[str, list[list[torch.Tensor]]]:
    """Every oracle problem's reference outputs, from one launch of WORLD gloo ranks."""
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
        return {slug: [torch.load(work / "out" / f"task{i}_trial0_rank{r}.pt", weights_only=True)
                       for r in range(WORLD)] for i, slug in enumerate(slugs)}


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
