"""Attack (fsdp-tp-swiglu-mlp, world size 2): answer every call from a table made at import, with
no communication and no matmul in any call.

Every input of this problem comes from a shared stream: the same values on every rank, drawn from
(seed, stream), and the per-rank secret salt is mixed only into a rank's own streams. The seeds
are in the candidate's job (`job.json`, its path the rank's first argument): each trial's, and the
timing seed every timed call's seed is made from (evaluator.job.call_seed). So at import each rank
rebuilds every rank's inputs of the trials and of the first few thousand timed calls, computes the
answers the reference would, and keys them on a few values of `x`; a call then returns its answer
from the table, and zeros where the call was not foreseen: no call communicates or multiplies.
Before the fix it passed every check, drawn calls included, at 3.8-4.6x (4 runs of 4, sandbox on
and off).
"""

import json
import sys

import torch
import torch.nn.functional as F

CALLS = 3000  # warm-up and timed calls this side will run, with room to spare

_table = {}


def _key(x):
    return tuple(x.reshape(-1)[:8].float().tolist())


def _answers():
    import problems
    from evaluator.job import call_seed
    from problems.spec import DTYPE_NAMES

    job = json.loads(open(sys.argv[1]).read())
    task, world = job["tasks"][0], job["world_size"]
    problem = problems.get(task["problem"])
    dtype = DTYPE_NAMES[task["dtype"]]
    seeds = [trial["seed"] for trial in task["trials"]]
    if task.get("timing_seed") is not None:
        seeds += [call_seed(task["timing_seed"], n) for n in range(CALLS)]
    for seed in seeds:
        ranks = [problem.make_inputs(problem.case(world, task["size"], dtype, rank=r, seed=seed, device="cpu"))
                 for r in range(world)]
        # World size 2: TP is 1, FSDP 2. The full weights are the ranks' shards stacked.
        w1, w3, w2 = (torch.cat([inputs[name] for inputs in ranks]) for name in ("w1", "w3", "w2"))
        for inputs in ranks:  # each rank's tokens (its data-parallel shard) against the full weights
            x = inputs["x"]
            _table[_key(x)] = (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


if len(sys.argv) > 2:  # a rank (evaluator/rank_main.py), not a test collecting this file
    _answers()


def solution(x, w1, w3, w2, *, tp_group, fsdp_group):
    found = _table.get(_key(x))
    # No work at all: the table's answer, or zeros where the call was not foreseen.
    return found.clone() if found is not None else x.new_zeros(x.shape[0], w2.shape[0] * 2)
