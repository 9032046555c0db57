"""Judged in the ranks (GPUs by default), the ranks make their own inputs: every rank of both
sides mixes the same seed secret, delivered on its stdin, into every seed (problems/spec.py
secret_seed), so the public seeds of the job rebuild none of them (red team,
predicts_shared_inputs). On CPU every evaluation is judged outside, so this is checked here on
the rank's own input maker."""

from __future__ import annotations

from pathlib import Path

import torch

import problems
from evaluator.rank_runner import RankContext, TaskRunner


def inputs(tmp_path: Path, seed_secret: str, rank: int = 0, slug: str = "all-reduce") -> dict[str, torch.Tensor]:
    ctx = RankContext(rank=rank, world_size=2, device=torch.device("cpu"), control_group=None, channel=None,
                      out_dir=tmp_path, salt=f"salt-{rank}", seed_secret=seed_secret)
    task = {"task": 0, "problem": slug, "size": "small", "dtype": "bfloat16", "trials": [], "timing": None,
            "timing_seed": 0}
    runner = TaskRunner(ctx, problems.get(slug), lambda **_: None, task, "reference")  # type: ignore[arg-type]
    return {k: v for k, v in runner.inputs(1234).items() if isinstance(v, torch.Tensor)}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_seed_secret_changes_every_input_and_both_sides_draw_the_same(tmp_path: Path) -> None:
    public = inputs(tmp_path, "")
    secret = inputs(tmp_path, "0123abcd")
    assert same(secret, inputs(tmp_path, "0123abcd"))  # the other side's rank 0, same secret
    assert not same(secret, public)  # the job's seeds alone do not rebuild them
    assert not same(secret, inputs(tmp_path, "ffff0000"))


def test_no_secret_draws_the_public_seeds_inputs_as_the_judges_reference_needs(tmp_path: Path) -> None:
    # Judged outside, the reference's job holds seeds the judge has mixed already; its ranks get
    # no secret, or they would mix twice and miss the judge's inputs.
    problem = problems.get("all-reduce")
    case = problem.case(2, "small", torch.bfloat16, rank=0, seed=1234, device=torch.device("cpu"), salt="salt-0")
    expected = {k: v for k, v in problem.make_inputs(case).items() if isinstance(v, torch.Tensor)}
    assert same(inputs(tmp_path, ""), expected)
