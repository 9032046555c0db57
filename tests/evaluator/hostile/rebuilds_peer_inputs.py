"""Attack (all-reduce): skip the communication. Every trial's seed is in the job file that every
rank reads (its path is on the command line) and the input generator is public, so each rank
rebuilds its peers' inputs and sums them locally. Without a per-rank secret in the inputs this
passes every trial and moves no data."""

import json
import sys

import torch
import torch.distributed as dist

import problems

_calls = 0


def _trial_seeds() -> list[int]:
    job = json.loads(open(sys.argv[1]).read())
    return [trial["seed"] for trial in job["tasks"][0]["trials"]]


def solution(x, *, group):
    global _calls
    seeds, call = _trial_seeds(), _calls
    _calls += 1
    if call >= len(seeds):
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out
    problem = problems.get("all-reduce")
    world = dist.get_world_size(group)
    total = torch.zeros_like(x, dtype=torch.float32)
    for rank in range(world):
        case = problem.case(world, "small", x.dtype, rank=rank, seed=seeds[call], device=x.device)
        total += problem.make_inputs(case)["x"].float()
    return total.to(x.dtype)
