"""Distributed sample sort: splitters from gathered samples, all-to-all by bucket, local merge."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

OVERSAMPLE = 4  # samples per rank = OVERSAMPLE * world


def reference(keys: torch.Tensor, payload: torch.Tensor, *, group: dist.ProcessGroup):
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    n = keys.shape[0]
    # 1. Local sort (stable), remembering each element's global index rank * n + i.
    sk, order = torch.sort(keys, stable=True)
    gidx = order + rank * n
    # 2. Regular samples of the sorted local keys, gathered; world-1 splitters from them.
    s = OVERSAMPLE * world
    pos = (torch.arange(1, s + 1, device=keys.device) * n) // (s + 1)
    samples = torch.empty(world * s, dtype=keys.dtype, device=keys.device)
    dist.all_gather_into_tensor(samples, sk[pos].contiguous(), group=group)
    all_samples, _ = torch.sort(samples)
    splitters = all_samples[torch.arange(1, world, device=keys.device) * s]
    # 3. Bucket b takes keys in [splitter b-1, splitter b); the sorted keys form contiguous runs.
    dest = torch.searchsorted(splitters, sk, right=True)
    send_counts = torch.bincount(dest, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    send_splits, recv_splits = send_counts.tolist(), recv_counts.tolist()
    total = sum(recv_splits)
    # 4. Exchange keys, payload rows and global indices.
    r_keys = torch.empty(total, dtype=keys.dtype, device=keys.device)
    dist.all_to_all_single(r_keys, sk, recv_splits, send_splits, group=group)
    r_payload = torch.empty((total, payload.shape[1]), dtype=payload.dtype, device=payload.device)
    dist.all_to_all_single(r_payload, payload[order], recv_splits, send_splits, group=group)
    r_gidx = torch.empty(total, dtype=gidx.dtype, device=gidx.device)
    dist.all_to_all_single(r_gidx, gidx, recv_splits, send_splits, group=group)
    # 5. Merge the sorted runs (stable: equal keys keep source-rank, then source order).
    merged_keys, perm = torch.sort(r_keys, stable=True)
    return merged_keys, r_payload[perm], r_gidx[perm]


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case["keys"] // case.world_size
    return {
        # Rank-dependent skew so that bucket sizes are uneven.
        "keys": case.randn(n, stream="keys", dtype=torch.float32)
        + case.rand(1, stream="shift", dtype=torch.float32, high=2.0),
        "payload": case.randn(n, case["width"], stream="payload"),
    }


def roofline(s: Setting) -> Traffic:
    n, world = s["keys"] // s.world_size, s.world_size
    row = 4 + 8 + s["width"] * s.itemsize  # key, global index, payload row
    # Balanced buckets: (world-1)/world of the rows leave the rank.
    return Traffic(link_bytes=traffic.all_to_all(n * row, world), hbm_bytes=4 * n * row,
                   flops=0.0 + n)


PROBLEM = Problem(
    id=1306,
    slug="distributed-sample-sort",
    title="Distributed sample sort with payload (all-to-all by splitter bucket)",
    description=(
        "Sorting a dataset spread over GPUs, as cuNumeric's NCCL sample sort does for "
        "distributed arrays (and data pipelines do for length-bucketing or deduplication): "
        "each rank sorts locally, takes regular samples, all ranks gather the samples and pick "
        "world-1 splitters, every rank sends each bucket of its sorted keys (with payload rows "
        "and global indices) to the bucket's owner after exchanging the counts, and each owner "
        "merges the sorted runs it received. The output is rank r's bucket in globally sorted "
        "order; its length depends on the data. Conventions that fix the result: 4*world "
        "regular samples per rank at positions (j+1)*n//(s+1), splitters at sorted sample "
        "positions (i+1)*s, a key equal to a splitter goes to the upper bucket, and ties keep "
        "(source rank, local order). The reference pays a host sync for the counts and several "
        "passes; a fast one fuses bucketing with the sends and merges runs as they arrive."
    ),
    categories=("other",),
    source=Source("cuNumeric", "src/cunumeric/sort/sort.cu: sample_sort_nccl_nd",
                  "https://github.com/nv-legate/cunumeric"),
    collectives=("all_gather", "all_to_all"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"keys": 512, "width": 4}, "default": {"keys": 2**23, "width": 32}},
    # Pure data movement: exact.
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
)
