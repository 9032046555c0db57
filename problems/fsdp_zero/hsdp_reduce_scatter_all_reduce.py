"""FSDP2 hybrid sharding (HSDP) gradient reduction: the block's gradients are reduce-scattered
inside the shard group, the shards are all-reduced across the replicate group, and the result is
divided and cast to fp32 (torch fully_shard foreach_reduce with a 2-D mesh)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.groups import grid, half_tp
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def hsdp_groups(world_size: int) -> GroupLayout:
    # Mesh (replicate, shard): shard groups are consecutive ranks (one node), replicas strided.
    shard_groups, replicate_groups = grid(world_size, half_tp(world_size))
    return {"shard_group": shard_groups, "replicate_group": replicate_groups}


def block_shapes(hidden: int, kv_dim: int, ffn: int) -> list[tuple[str, int, int]]:
    return [("attention_norm", hidden, 0), ("wq", hidden, hidden), ("wk", kv_dim, hidden),
            ("wv", kv_dim, hidden), ("wo", hidden, hidden), ("ffn_norm", hidden, 0),
            ("w1", ffn, hidden), ("w3", ffn, hidden), ("w2", hidden, ffn)]


def divide_factors(world: int) -> tuple[float, float]:
    factor = 1
    while world % factor == 0 and world / factor > factor:
        factor *= 2
    return float(factor), world / factor


def reference(attention_norm: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
              wo: torch.Tensor, ffn_norm: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor,
              w2: torch.Tensor, *, shard_group: dist.ProcessGroup,
              replicate_group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    shard = dist.get_world_size(shard_group)
    replicas = dist.get_world_size(replicate_group)
    grads = [attention_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2]
    send = torch.cat([g.reshape(shard, -1) for g in grads], dim=1)
    # The average runs over all shard * replicate ranks, split into a pre- and post-division.
    pre, post = divide_factors(shard * replicas)
    send.div_(pre)
    out = torch.empty(send.shape[1], dtype=send.dtype, device=send.device)
    dist.reduce_scatter_tensor(out, send.reshape(-1), op=dist.ReduceOp.SUM, group=shard_group)
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=replicate_group)
    out.div_(post)
    out = out.float()
    shards = []
    offset = 0
    for g in grads:
        n = g.numel() // shard
        shards.append(out[offset:offset + n].view(g.shape[0] // shard, *g.shape[1:]).clone())
        offset += n
    return tuple(shards)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    inputs = {}
    for name, rows, cols in block_shapes(case["hidden"], case["kv_dim"], case["ffn"]):
        shape = (rows,) if cols == 0 else (rows, cols)
        inputs[name] = case.randn(*shape, stream=name)
    return inputs


def roofline(s: Setting) -> Traffic:
    numel = sum(r * max(c, 1) for _, r, c in block_shapes(s["hidden"], s["kv_dim"], s["ffn"]))
    nbytes = numel * s.itemsize
    shard = half_tp(s.world_size)
    replicas = s.world_size // shard
    link = traffic.reduce_scatter(nbytes, shard) + traffic.all_reduce(nbytes / shard, replicas)
    return Traffic(link_bytes=link, hbm_bytes=nbytes + 4 * numel / shard,
                   flops=numel + 3 * numel / shard)


PROBLEM = Problem(
    id=312,
    slug="hsdp-reduce-scatter-all-reduce",
    title="HSDP gradient reduction: reduce-scatter in the shard group, all-reduce across replicas",
    description=(
        "With hybrid sharding (fully_shard on a 2-D (replicate, shard) device mesh) parameters "
        "are sharded inside a node and replicated across nodes. After a block's backward, "
        "FSDP2's foreach_reduce packs the bf16 gradients rank-major, pre-divides, "
        "reduce-scatters them inside the shard group, all-reduces the resulting shard across "
        "the replicate group, post-divides (the two factors multiply to the total data-parallel "
        "size) and casts to the fp32 sharded gradients. The two collectives run back to back for "
        "every block in backward; a fast kernel pipelines them chunk by chunk so the "
        "cross-replica all-reduce of the first chunks runs while later chunks are still being "
        "reduce-scattered. Groups: shard groups of world/2 consecutive ranks, replicate groups "
        "strided (at world size 2 the shard group is a single rank and only the all-reduce "
        "moves data)."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("PyTorch",
                  "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: foreach_reduce (all_reduce_group)",
                  "https://github.com/pytorch/pytorch"),
    collectives=("reduce_scatter", "all_reduce"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"hidden": 32, "kv_dim": 16, "ffn": 48},
           "default": {"hidden": 2048, "kv_dim": 512, "ffn": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=hsdp_groups,
    tags=("backward",),
)
