"""Author's check for one or more problems: run each reference on gloo and sanity-check it.

    python tools/try_problem.py SLUG [SLUG ...] [--world-size 2 4] [--size small]

For each world size it spawns the ranks once, and for each problem: builds inputs for two seeds,
runs the reference twice on the first seed (outputs must match exactly: determinism) and once on
the second (outputs must differ: inputs really are seeded), checks that outputs are finite
tensors, that inputs not listed in ``may_overwrite`` were left untouched, that meta-device inputs
have the same shapes as the real ones, and that roofline traffic is positive.
This is a fast authoring loop; CI runs the evaluator's batched reference check instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import problems  # noqa: E402


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _build_groups(problem, world_size, rank):
    kwargs = {}
    for name, layout in problem.process_groups(world_size).items():
        mine = None
        for ranks in layout:
            if ranks == list(range(world_size)):
                group = dist.group.WORLD
            else:
                group = dist.new_group(ranks)
            if rank in ranks:
                mine = group
        kwargs[name] = mine
    return kwargs


def _check(problem, world_size, size, rank):
    groups = _build_groups(problem, world_size, rank)
    dtype = problem.default_dtype
    def run(seed):
        inputs = problem.make_inputs(problem.case(world_size, size, dtype, rank=rank, seed=seed, device="cpu"))
        before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        out = _as_list(problem.reference(**inputs, **groups))
        for name, t in before.items():
            if name not in problem.may_overwrite and not torch.equal(t, inputs[name]):
                raise AssertionError(f"reference modified input {name!r} (add it to may_overwrite?)")
        return inputs, out
    inputs, a = run(1)
    _, b = run(1)
    _, c = run(2)
    meta = problem.make_inputs(problem.case(world_size, size, dtype, rank=rank, seed=1, device="meta"))
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor) and tuple(meta[k].shape) != tuple(v.shape):
            raise AssertionError(f"meta input {k} has shape {tuple(meta[k].shape)}, real {tuple(v.shape)}")
    for i, (x, y, z) in enumerate(zip(a, b, c)):
        if not isinstance(x, torch.Tensor):
            raise AssertionError(f"output {i} is {type(x).__name__}, not a tensor")
        if x.is_floating_point() and not torch.isfinite(x).all():
            raise AssertionError(f"output {i} has NaN/Inf")
        if not torch.equal(x, y):
            raise AssertionError(f"output {i} differs between two runs with the same seed")
        if x.numel() > 1 and x.shape == z.shape and torch.equal(x, z):
            raise AssertionError(f"output {i} is identical for seeds 1 and 2")
    t = problem.traffic(problem.setting(world_size, size))
    if not (t.link_bytes > 0 and t.hbm_bytes > 0):
        raise AssertionError(f"traffic must be positive: {t}")
    t = problem.traffic(problem.setting(world_size, "default"))
    return [tuple(x.shape) for x in a], t


def _worker(rank, world_size, store_path, slugs, size, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world_size), rank=rank, world_size=world_size)
    for slug in slugs:
        problem = problems.get(slug)
        if world_size not in problem.world_sizes:
            if rank == 0:
                queue.put((slug, "skip", f"world size {world_size} unsupported: {problem.world_size_note}"))
            continue
        try:
            shapes, t = _check(problem, world_size, size, rank)
            if rank == 0:
                queue.put((slug, "ok", f"outputs {shapes}; default traffic link {t.link_bytes/2**20:.1f} MiB, hbm {t.hbm_bytes/2**20:.1f} MiB, {t.flops/1e9:.2f} GFLOP"))
        except Exception:
            queue.put((slug, "FAIL", f"rank {rank}: {traceback.format_exc()}"))
            os._exit(1)
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("slugs", nargs="*")
    parser.add_argument("--world-size", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--size", default="small")
    args = parser.parse_args()
    slugs = args.slugs or [p.slug for p in problems.all_problems()]
    failed = False
    for world_size in args.world_size:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        with tempfile.TemporaryDirectory() as tmp:
            procs = [ctx.Process(target=_worker, args=(r, world_size, os.path.join(tmp, "store"), slugs, args.size, queue)) for r in range(world_size)]
            for p in procs:
                p.start()
            for p in procs:
                p.join(timeout=600)
                if p.is_alive():
                    p.kill()
        while not queue.empty():
            slug, status, msg = queue.get()
            failed |= status == "FAIL"
            print(f"[ws={world_size}] {status:4} {slug}: {msg}")
        failed |= any(p.exitcode for p in procs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
