"""DDP Reducer: gradients of many differently-shaped parameters averaged through flat buckets."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

# One transformer block's parameters, in module registration order: (name, shape for hidden h).
_PARAMS = (
    ("ln1_w", lambda h: (h,)), ("ln1_b", lambda h: (h,)),
    ("qkv_w", lambda h: (3 * h, h)), ("qkv_b", lambda h: (3 * h,)),
    ("proj_w", lambda h: (h, h)), ("proj_b", lambda h: (h,)),
    ("ln2_w", lambda h: (h,)), ("ln2_b", lambda h: (h,)),
    ("fc1_w", lambda h: (4 * h, h)), ("fc1_b", lambda h: (4 * h,)),
    ("fc2_w", lambda h: (h, 4 * h)), ("fc2_b", lambda h: (h,)),
)
NAMES = tuple(name for name, _ in _PARAMS)


def _buckets(sizes: list[int], itemsize: int, first_cap: int, cap: int) -> list[list[int]]:
    """Greedy bucket assignment over parameters in reverse registration order (DDP's order:
    gradients become ready roughly backwards). The first bucket has its own, smaller cap."""
    buckets, current, used = [], [], 0
    limit = first_cap
    for i in reversed(range(len(sizes))):
        current.append(i)
        used += sizes[i] * itemsize
        if used >= limit:
            buckets.append(current)
            current, used, limit = [], 0, cap
    if current:
        buckets.append(current)
    return buckets


def reference(ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w,
              fc2_b, *, group: dist.ProcessGroup):
    stacked = (ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b)
    world = dist.get_world_size(group)
    layers = stacked[0].shape[0]
    # Flat parameter list in model.parameters() order: layer by layer, then name by name.
    grads = [g[layer] for layer in range(layers) for g in stacked]
    outs = [torch.empty_like(g) for g in stacked]
    out_views = [o[layer] for layer in range(layers) for o in outs]
    itemsize = stacked[0].element_size()
    first_cap, cap = _CAPS[stacked[0].shape[-1] <= 64]
    for bucket in _buckets([g.numel() for g in grads], itemsize, first_cap, cap):
        # Copy into the flat bucket, pre-dividing by the world size as the Reducer does.
        flat = torch.cat([grads[i].reshape(-1) for i in bucket]).mul_(1.0 / world)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
        offset = 0
        for i in bucket:
            n = grads[i].numel()
            out_views[i].copy_(flat[offset:offset + n].view_as(out_views[i]))
            offset += n
    return tuple(outs)


# (first bucket cap, bucket cap) in bytes: DDP's 1 MiB / 25 MiB defaults; tiny caps for the
# small preset (hidden <= 64) so that it still exercises several buckets.
_CAPS = {False: (1 * 2**20, 25 * 2**20), True: (512, 4096)}


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    h, layers = case["hidden"], case["layers"]
    return {name: case.randn(layers, *shape(h), stream=name) for name, shape in _PARAMS}


def _numel(s: Setting) -> int:
    h = s["hidden"]
    total = 0
    for _, shape in _PARAMS:
        n = 1
        for d in shape(h):
            n *= d
        total += n
    return total * s["layers"]


def roofline(s: Setting) -> Traffic:
    nbytes = _numel(s) * s.itemsize
    return Traffic(link_bytes=traffic.all_reduce(nbytes, s.world_size), hbm_bytes=2 * nbytes,
                   flops=s.world_size * _numel(s))


PROBLEM = Problem(
    id=201,
    slug="ddp-bucketed-grad-allreduce",
    title="DDP bucketed gradient all-reduce (flatten, average, unflatten)",
    description=(
        "PyTorch DistributedDataParallel does not all-reduce parameters one by one: its Reducer "
        "packs the gradients of many differently-shaped parameters (here the 12 tensors of each "
        "transformer block: LayerNorm vectors, biases, QKV/projection/MLP matrices) into flat "
        "buckets in reverse registration order (a 1 MiB first bucket, then 25 MiB ones), scales "
        "them by 1/world while copying in, all-reduces each bucket and copies the averaged values "
        "back into every gradient's shape. The output is every gradient averaged over the "
        "data-parallel ranks. The flatten and unflatten copies and the per-bucket launches cost "
        "HBM passes and latency around ~200 MiB of traffic per step; a fast kernel reduces "
        "straight from and into the individual gradient tensors, fusing the scaling."
    ),
    categories=("data",),
    source=Source("PyTorch", "torch/csrc/distributed/c10d/reducer.cpp: Reducer::mark_variable_ready_dense",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"hidden": 16, "layers": 2}, "default": {"hidden": 1024, "layers": 8}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("backward",),
)
