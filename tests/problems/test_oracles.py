"""References compute what they claim: their gloo outputs against a single-process computation
from every rank's inputs (float32, small preset, 4 ranks).

The plain collectives are checked exactly, and a few fused problems against the dense math of the
layer they shard: a check on the problem definitions, independent of the harness's judging.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import problems
from evaluator.config import Limits
from evaluator.launcher import run_side

pytestmark = pytest.mark.slow
WORLD = 4
SEED = 5

Inputs = list[dict[str, torch.Tensor]]
Oracle = Callable[[Inputs], list[list[torch.Tensor]]]


def run_reference(slug: str) -> tuple[Inputs, list[list[torch.Tensor]]]:
    problem = problems.get(slug)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "out").mkdir()
        (work / "stacks").mkdir()
        job = {"side": "reference", "world_size": WORLD, "device": "cpu", "backend": "gloo",
               "solution_path": None, "store_path": str(work / "store"), "stack_dir": str(work / "stacks"),
               "out_dir": str(work / "out"), "threads": 1, "collective_timeout_s": 120,
               "tasks": [{"task": 0, "problem": slug, "size": "small", "dtype": "float32",
                          "trials": [{"index": 0, "seed": SEED}], "timing": None, "timing_seed": 0}]}
        result = run_side(job, work, Limits(startup_s=120, step_s=60, total_s=180), 0.0)
        assert result.ok, result.failure
        outputs = [torch.load(work / "out" / f"task0_trial0_rank{r}.pt", weights_only=True) for r in range(WORLD)]
    inputs = [problem.make_inputs(problem.case(WORLD, "small", torch.float32, rank=r, seed=SEED, device="cpu"))
              for r in range(WORLD)]
    return inputs, outputs


def each(value: Callable[[int], torch.Tensor]) -> list[list[torch.Tensor]]:
    return [[value(r)] for r in range(WORLD)]


def xs(inputs: Inputs, name: str = "x") -> list[torch.Tensor]:
    return [i[name] for i in inputs]


def all_reduce(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs)).sum(0)
    return each(lambda r: total)


def all_gather(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: torch.cat(xs(inputs)))


def reduce_scatter(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs)).sum(0)
    return each(lambda r: total.chunk(WORLD)[r])


def all_to_all(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: torch.cat([x.chunk(WORLD)[r] for x in xs(inputs)]))


def broadcast(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: inputs[0]["x"])


def reduce(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs)).sum(0)
    return each(lambda r: total if r == 0 else inputs[r]["x"])


def gather(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: torch.stack(xs(inputs)) if r == 0 else inputs[r]["x"])


def scatter(inputs: Inputs) -> list[list[torch.Tensor]]:
    return each(lambda r: inputs[0]["x"][r])


def allgather_gemm(inputs: Inputs) -> list[list[torch.Tensor]]:
    x_full = torch.cat(xs(inputs, "x_shard"))
    return each(lambda r: x_full.double() @ inputs[r]["weight_shard"].double().t())


def gemm_reducescatter(inputs: Inputs) -> list[list[torch.Tensor]]:
    # The dense layer: the full input (hidden concatenated) times the full weight.
    x = torch.cat(xs(inputs, "x_parallel"), dim=-1).double()
    w = torch.cat(xs(inputs, "weight_shard"), dim=-1).double()
    y = x @ w.t() + inputs[0]["bias"].double()
    return each(lambda r: y.chunk(WORLD, dim=0)[r])


def rmsnorm(inputs: Inputs) -> list[list[torch.Tensor]]:
    x = torch.cat(xs(inputs, "x_shard"), dim=-1).double()
    w = torch.cat(xs(inputs, "weight_shard")).double()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    return each(lambda r: y.chunk(WORLD, dim=-1)[r])


def vocab_cross_entropy(inputs: Inputs) -> list[list[torch.Tensor]]:
    logits = torch.cat(xs(inputs, "logits"), dim=-1).double()
    loss = F.cross_entropy(logits, inputs[0]["target"], reduction="none")
    return each(lambda r: loss)


def ulysses(inputs: Inputs) -> list[list[torch.Tensor]]:
    full = torch.cat(xs(inputs))  # [seq, batch, heads, dim]
    return each(lambda r: full.chunk(WORLD, dim=2)[r])


ORACLES: dict[str, tuple[Oracle, float]] = {
    "all-reduce": (all_reduce, 1e-6), "all-gather": (all_gather, 0.0),
    "reduce-scatter": (reduce_scatter, 1e-6), "all-to-all": (all_to_all, 0.0),
    "broadcast": (broadcast, 0.0), "reduce": (reduce, 1e-6), "gather": (gather, 0.0),
    "scatter": (scatter, 0.0), "tp-allgather-gemm": (allgather_gemm, 1e-4),
    "tp-gemm-reducescatter": (gemm_reducescatter, 1e-4), "tp-rmsnorm": (rmsnorm, 1e-4),
    "vocab-parallel-cross-entropy": (vocab_cross_entropy, 1e-4), "ulysses-all-to-all": (ulysses, 0.0),
}


@pytest.mark.parametrize("slug", sorted(ORACLES))
def test_the_reference_matches_the_single_process_math(slug):
    oracle, tol = ORACLES[slug]
    inputs, outputs = run_reference(slug)
    expected = oracle(inputs)
    for rank in range(WORLD):
        assert len(outputs[rank]) == len(expected[rank])
        for got, want in zip(outputs[rank], expected[rank]):
            assert got.shape == want.shape, (rank, got.shape, want.shape)
            torch.testing.assert_close(got.double(), want.double(), atol=tol, rtol=tol)
