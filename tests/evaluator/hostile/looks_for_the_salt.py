"""Attack (all-reduce), class 4: with the per-rank salt, every rank can rebuild its peers' inputs
(the generator is public) and sum them locally, moving no data. The salt was on the rank's
context object, reachable through gc. Without it, this returns the unreduced input: a value
mismatch, never a pass."""

import gc

import torch

import problems

_salts = None


def _find_salts():
    for obj in gc.get_objects():
        if type(obj).__name__ == "RankContext" and getattr(obj, "salt", ""):
            return obj
    return None


def solution(x, *, group):
    import torch.distributed as dist

    ctx = _find_salts()
    if ctx is None:
        return x.clone()  # nothing to rebuild from
    # Only this rank's salt is known; a peer's salt is the same length and the harness drew it the
    # same way: the in-rank judge gave rank r its own. Rebuilding needs every rank's: exchange them
    # once (a few bytes, not the data), then sum locally forever.
    global _salts
    if _salts is None:
        mine = torch.tensor(list(ctx.salt.encode()), dtype=torch.uint8)
        every = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
        dist.all_gather(every, mine, group=group)
        _salts = [bytes(t.tolist()).decode() for t in every]
    return x.clone() * 0 + _rebuild_sum(x, ctx)


def _inputs(x, rank, seed, salt):
    problem = problems.get("all-reduce")
    case = problem.case(len(_salts), "small", x.dtype, rank=rank, seed=seed, device="cpu", salt=salt)
    return problem.make_inputs(case)["x"]


def _rebuild_sum(x, ctx):
    """Find the seed that made this rank's input, then make every rank's and add them up."""
    global _calls
    _calls += 1
    for seed in _seeds_to_try():
        if torch.equal(_inputs(x, ctx.rank, seed, _salts[ctx.rank]), x):
            total = sum(_inputs(x, rank, seed, salt).float() for rank, salt in enumerate(_salts))
            return total.to(x.dtype)
    return x.clone()


_calls = 0


def _seeds_to_try():
    import json
    import sys

    from evaluator.job import call_seed

    task = json.loads(open(sys.argv[1]).read())["tasks"][0]
    seeds = [t["seed"] for t in task["trials"]]
    timed = _calls - len(seeds) - 1  # this call's number among the timed ones
    return seeds + [call_seed(task["timing_seed"], n) for n in range(max(0, timed - 4), timed + 40)]
