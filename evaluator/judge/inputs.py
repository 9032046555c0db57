"""The judge makes every input a rank gets, from a secret salt per rank that no rank sees.

The same function, with the same seeds and salts, is what the reference's ranks run to recompute
a checked call (problems.spec.Case): on CPU both give the same bytes; on GPUs the judge makes
each rank's inputs on that rank's GPU with the same device generators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from problems.spec import Problem, secret_seed

from .buffers import input_bytes

# An output slot holds this many times the problem's HBM bytes per rank (its inputs read once and
# outputs written once, at least), or this many times the world's inputs, whichever is more.
# Measured over every problem's reference at the small size on 4 ranks: outputs reach 1.6 x the
# HBM bytes and 12 x the rank's own inputs (tests/problems/test_oracles.py checks the bound).
HBM_MULTIPLE = 4
WORLD_INPUT_MULTIPLE = 4
MIN_SLOT_BYTES = 1 << 20


@dataclass(frozen=True)
class InputMaker:
    problem: Problem
    world_size: int
    size: str
    dtype: torch.dtype
    salts: tuple[str, ...]
    # Each rank's device ("cpu", or "cuda:N": its GPU, where the inputs are made by the same
    # generators its ranks would use); none: every rank on the CPU.
    devices: tuple[str, ...] = ()
    secret: str = ""  # mixed into every call's seed (secret_seed); the reference recomputes with the same

    def make(self, rank: int, seed: int) -> dict[str, Any]:
        device = self.devices[rank] if self.devices else "cpu"
        case = self.problem.case(self.world_size, self.size, self.dtype, rank=rank,
                                 seed=secret_seed(seed, self.secret), device=device, salt=self.salts[rank])
        return self.problem.make_inputs(case)

    def call_bytes(self, rank: int) -> int:
        """One call's inputs in the buffer, from shapes alone (inputs build on the meta device)."""
        case = self.problem.case(self.world_size, self.size, self.dtype, rank=rank, seed=0, device="meta")
        return input_bytes(self.problem.make_inputs(case))


def output_capacity(problem: Problem, world_size: int, size: str, dtype: torch.dtype, call_bytes: int) -> int:
    """The most output bytes one rank's call may hand back: checked before anything is read."""
    traffic = problem.traffic(problem.setting(world_size, size, dtype))
    return int(max(HBM_MULTIPLE * traffic.hbm_bytes, WORLD_INPUT_MULTIPLE * world_size * call_bytes, MIN_SLOT_BYTES))
