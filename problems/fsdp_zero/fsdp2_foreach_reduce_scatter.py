"""FSDP2 gradient reduce-scatter after a block's backward: the unsharded low-precision
gradients of every parameter in the block are packed rank-major into one buffer, pre-divided,
reduce-scattered, post-divided and cast to fp32 sharded gradients (torch fully_shard
foreach_reduce)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def block_shapes(hidden: int, kv_dim: int, ffn: int) -> list[tuple[str, int, int]]:
    return [("attention_norm", hidden, 0), ("wq", hidden, hidden), ("wk", kv_dim, hidden),
            ("wv", kv_dim, hidden), ("wo", hidden, hidden), ("ffn_norm", hidden, 0),
            ("w1", ffn, hidden), ("w3", ffn, hidden), ("w2", hidden, ffn)]


def divide_factors(world: int) -> tuple[float, float]:
    # FSDP's split of the 1/N average into a pre- and a post-division (keeps low-precision sums
    # in range): the pre factor is the power of two just past sqrt(N).
    factor = 1
    while world % factor == 0 and world / factor > factor:
        factor *= 2
    return float(factor), world / factor


def reference(attention_norm: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
              wo: torch.Tensor, ffn_norm: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor,
              w2: torch.Tensor, *, group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    world = dist.get_world_size(group)
    grads = [attention_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2]
    # Copy-in: row r of the (world, total/world) input holds every gradient's r-th dim-0 chunk.
    send = torch.cat([g.reshape(world, -1) for g in grads], dim=1)
    pre, post = divide_factors(world)
    send.div_(pre)
    out = torch.empty(send.shape[1], dtype=send.dtype, device=send.device)
    dist.reduce_scatter_tensor(out, send.reshape(-1), op=dist.ReduceOp.SUM, group=group)
    out.div_(post)
    # Copy-out: the sharded gradients live with the fp32 sharded parameters.
    out = out.float()
    shards = []
    offset = 0
    for g in grads:
        rows = g.shape[0] // world
        n = g.numel() // world
        shards.append(out[offset:offset + n].view(rows, *g.shape[1:]).clone())
        offset += n
    return tuple(shards)


def make_inputs(case: Case) -> dict[str, object]:
    inputs: dict[str, object] = {}
    for name, rows, cols in block_shapes(case["hidden"], case["kv_dim"], case["ffn"]):
        shape = (rows,) if cols == 0 else (rows, cols)
        # Unsharded gradients in the param dtype, different on every data-parallel rank.
        inputs[name] = case.randn(*shape, stream=name)
    return inputs


def _numel(s: Setting) -> int:
    return sum(rows * max(cols, 1) for _, rows, cols in block_shapes(s["hidden"], s["kv_dim"], s["ffn"]))


def roofline(s: Setting) -> Traffic:
    numel = _numel(s)
    in_bytes = numel * s.itemsize
    return Traffic(link_bytes=traffic.reduce_scatter(in_bytes, s.world_size),
                   hbm_bytes=in_bytes + 4 * numel / s.world_size,
                   flops=numel + 2 * numel / s.world_size)


PROBLEM = Problem(
    id=304,
    slug="fsdp2-foreach-reduce-scatter",
    title="FSDP2 block gradient reduce-scatter with mixed precision",
    description=(
        "After a fully_shard-wrapped block finishes its backward, FSDP2's foreach_reduce "
        "reduces the gradients of all of the block's parameters in one collective: it copies the "
        "unsharded bf16 gradients into a rank-major flat buffer (row r holds every gradient's "
        "r-th dim-0 chunk), divides by a pre-factor, reduce-scatters, divides the result by the "
        "post-factor and casts it to fp32, where the sharded gradients of the fp32 sharded "
        "parameters live. The reduce-scatter of every block's gradients (here about 120 MiB) "
        "overlaps the backward of the next block, and the copy-in, the two divisions and the "
        "cast are separate passes; a fast kernel reads the gradients in place, sums peers' "
        "chunks with the scaling folded in, and writes fp32 shards directly."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("PyTorch",
                  "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: foreach_reduce",
                  "https://github.com/pytorch/pytorch"),
    collectives=("reduce_scatter",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"hidden": 32, "kv_dim": 16, "ffn": 48},
           "default": {"hidden": 2048, "kv_dim": 512, "ffn": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("backward",),
)
