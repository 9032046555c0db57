"""ParallelKernelBench runs everything in bfloat16 by default: every problem one of its files maps
to (through an adapter) takes bfloat16, and the exact-answer judge accepts the reference itself in
bfloat16 where the problem used to be float32-only."""

from __future__ import annotations

from pathlib import Path

import pytest

import problems
from evaluator.api import evaluate
from evaluator.config import EvalConfig
from portal.runs.pkb.adapters import ADAPTERS
from problems.spec import dtype_name

# Float32-only before issue 22; their references now take bfloat16 inputs.
WERE_FLOAT32_ONLY = ("ddp-training-step", "zero1-training-step", "zero2-training-step",
                     "fsdp-training-step", "deepmd-kalman-optimizer-step", "ibot-patch-sinkhorn-knopp",
                     "physicsnemo-distributed-rfft2")


def test_every_problem_a_pkb_adapter_maps_takes_bfloat16() -> None:
    mapped = sorted({a.slug for a in ADAPTERS})
    missing = [s for s in mapped if "bfloat16" not in {dtype_name(d) for d in problems.get(s).dtypes}]
    assert not missing and set(WERE_FLOAT32_ONLY) <= set(mapped)


def test_their_default_dtype_is_still_float32() -> None:
    # The committed H200 timings of these problems are float32 ones: bfloat16 is asked for.
    assert {dtype_name(problems.get(s).default_dtype) for s in WERE_FLOAT32_ONLY} == {"float32"}


# ZeRO-1, ZeRO-2 and FSDP's steps are make test-long's: the same family of sharded data-parallel
# training step as DDP's, which make test keeps with the three others (7 evaluations, about 7 s each).
SAME_FAMILY_IN_LONG = ("zero1-training-step", "zero2-training-step", "fsdp-training-step")


@pytest.mark.slow
@pytest.mark.parametrize("slug", [pytest.param(s, marks=[pytest.mark.long] if s in SAME_FAMILY_IN_LONG else [])
                                  for s in WERE_FLOAT32_ONLY])
def test_the_reference_passes_its_own_judge_in_bfloat16(slug: str, tmp_path: Path) -> None:
    # In this process (--sandbox=off reaches it through tests/conftest.py): `pkb eval --dtype`'s
    # path from the command line to this config is tests/evaluator/test_cli.py's.
    solution = tmp_path / "solution.py"
    solution.write_text(f"import problems\nsolution = problems.get({slug!r}).reference\n")
    result = evaluate(EvalConfig(problem=slug, solution_path=solution, world_size=2, device="cpu",
                                 size="small", dtype="bfloat16", trials=2, timing=False))
    assert result["setting"]["dtype"] == "bfloat16"
    assert result["verdict"] == "pass", result.get("failure")
