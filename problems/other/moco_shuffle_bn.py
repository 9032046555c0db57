"""MoCo shuffling BN: gather keys, shuffle across ranks, per-rank BatchNorm, unshuffle."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS = 1e-5


def reference(keys: torch.Tensor, perm: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
              *, group: dist.ProcessGroup) -> torch.Tensor:
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    b = keys.shape[0]
    # _batch_shuffle_ddp: gather the global batch; group rank 0's permutation is used by all.
    gathered = torch.empty((world * b, keys.shape[1]), dtype=keys.dtype, device=keys.device)
    dist.all_gather_into_tensor(gathered, keys, group=group)
    idx_shuffle = perm.clone()
    dist.broadcast(idx_shuffle, src=dist.get_global_rank(group, 0), group=group)
    mine = gathered[idx_shuffle.view(world, b)[rank]]
    # The key encoder's BatchNorm sees a random subset of the global batch (not synchronised).
    xf = mine.float()
    mean = xf.mean(dim=0)
    var = xf.var(dim=0, unbiased=False)
    y = ((xf - mean) * torch.rsqrt(var + EPS) * weight + bias).to(keys.dtype)
    # _batch_unshuffle_ddp: gather the outputs and undo the permutation.
    out_all = torch.empty_like(gathered)
    dist.all_gather_into_tensor(out_all, y, group=group)
    idx_unshuffle = torch.argsort(idx_shuffle)
    return out_all[idx_unshuffle.view(world, b)[rank]]


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    b, c = case["batch"] // case.world_size, case["channels"]
    f32 = torch.float32
    # A per-rank offset makes the shuffle matter: unshuffled BN would remove it.
    keys = case.randn(b, c, stream="k", dtype=f32) + case.randn(1, c, stream="ko", dtype=f32)
    return {
        "keys": keys.to(case.dtype),
        # Every rank draws its own permutation, as MoCo does; only group rank 0's is used.
        "perm": case.randperm(b * case.world_size, stream="perm"),
        "weight": case.rand(c, stream="w", shared=True, dtype=f32, low=0.5, high=1.5),
        "bias": case.randn(c, stream="b", shared=True, dtype=f32, std=0.1),
    }


def roofline(s: Setting) -> Traffic:
    n, c = s.world_size, s["channels"]
    full = s["batch"] * c * s.itemsize
    # Only the rows this rank needs must move: its shuffled slice in, its outputs back
    # (a direct exchange); the reference's two all-gathers move the whole batch twice.
    local = full / n
    link = 2 * (n - 1) / n * local + 8 * s["batch"]
    return Traffic(link_bytes=link, hbm_bytes=4 * local, flops=8 * local / s.itemsize)


PROBLEM = Problem(
    id=1302,
    slug="moco-shuffle-bn",
    title="MoCo shuffling BatchNorm (batch shuffle / unshuffle across ranks)",
    description=(
        "MoCo's key encoder must not see BatchNorm statistics from its own GPU's batch (that "
        "leaks information between query and key), so the keys are all-gathered, permuted with "
        "rank 0's random permutation (broadcast to everyone), each rank normalises its shuffled "
        "slice with BatchNorm, and the outputs are all-gathered again and unshuffled with the "
        "inverse permutation. The reference gathers the whole global batch twice although each "
        "rank needs only 1/world of it; a fast kernel reads exactly the rows it needs from the "
        "peers' buffers, normalises them, and writes each result straight back to its owner, "
        "turning two all-gathers into one direct permuted exchange each way."
    ),
    categories=("other",),
    source=Source("MoCo", "moco/builder.py: MoCo._batch_shuffle_ddp",
                  "https://github.com/facebookresearch/moco"),
    collectives=("all_gather", "broadcast"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 32, "channels": 24}, "default": {"batch": 65536, "channels": 2048}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
)
