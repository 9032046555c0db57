"""FSDP2 parameter all-gather before a block's forward: the dim-0 shards of every parameter in
the block are cast to the compute dtype, packed into one flat buffer, all-gathered in a single
collective and unpacked into the unsharded parameters (torch fully_shard foreach_all_gather)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

# One Llama-style transformer block wrapped by fully_shard: (name, rows, cols); cols 0 = 1-D.
def block_shapes(hidden: int, kv_dim: int, ffn: int) -> list[tuple[str, int, int]]:
    return [("attention_norm", hidden, 0), ("wq", hidden, hidden), ("wk", kv_dim, hidden),
            ("wv", kv_dim, hidden), ("wo", hidden, hidden), ("ffn_norm", hidden, 0),
            ("w1", ffn, hidden), ("w3", ffn, hidden), ("w2", hidden, ffn)]


def reference(attention_norm: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
              wo: torch.Tensor, ffn_norm: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor,
              w2: torch.Tensor, param_dtype: torch.dtype, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    world = dist.get_world_size(group)
    shards = [attention_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2]
    numels = [s.numel() for s in shards]
    # Copy-in: the shards, cast to the mixed-precision param dtype, side by side in one buffer.
    send = torch.cat([s.reshape(-1).to(param_dtype) for s in shards])
    recv = torch.empty(world * send.numel(), dtype=param_dtype, device=send.device)
    dist.all_gather_into_tensor(recv, send, group=group)
    # Copy-out: for each parameter, the rank-r chunk is rank r's dim-0 shard; stacking the
    # chunks of all ranks along dim 0 gives the unsharded parameter.
    per_rank = recv.view(world, -1)
    outs = []
    offset = 0
    for s, n in zip(shards, numels):
        chunk = per_rank[:, offset:offset + n]
        outs.append(chunk.reshape(world * s.shape[0], *s.shape[1:]).contiguous())
        offset += n
    return tuple(outs)


def make_inputs(case: Case) -> dict[str, object]:
    world = case.world_size
    inputs: dict[str, object] = {}
    for name, rows, cols in block_shapes(case["hidden"], case["kv_dim"], case["ffn"]):
        shape = (rows // world,) if cols == 0 else (rows // world, cols)
        # Sharded parameters are kept in fp32; each rank holds a different dim-0 slice.
        inputs[name] = case.randn(*shape, stream=name, dtype=torch.float32, std=0.02)
    inputs["param_dtype"] = case.dtype
    return inputs


def _numel(s: Setting) -> int:
    return sum(rows * max(cols, 1) for _, rows, cols in block_shapes(s["hidden"], s["kv_dim"], s["ffn"]))


def roofline(s: Setting) -> Traffic:
    numel = _numel(s)
    out_bytes = numel * s.itemsize
    # Read the fp32 shard once, write the unsharded params once.
    return Traffic(link_bytes=traffic.all_gather(out_bytes, s.world_size),
                   hbm_bytes=4 * numel / s.world_size + out_bytes)


PROBLEM = Problem(
    id=303,
    slug="fsdp2-foreach-all-gather",
    title="FSDP2 block parameter all-gather (copy-in, all-gather, copy-out)",
    description=(
        "Before a fully_shard-wrapped transformer block runs its forward, FSDP2 gathers all of "
        "the block's parameters at once: foreach_all_gather casts each rank's fp32 dim-0 shards "
        "to the mixed-precision param dtype and packs them into one flat buffer, issues a single "
        "all_gather_into_tensor, and foreach_all_gather_copy_out splits the result back into "
        "unsharded tensors of nine different shapes (norms, attention and MLP weights). It "
        "happens for every block in forward and again in backward; it is overlapped with the "
        "previous block's compute but the copy-in and copy-out are extra passes over the "
        "memory. A fast kernel casts and writes each shard directly into every peer's unsharded "
        "parameters, with no staging buffers."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("PyTorch",
                  "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: foreach_all_gather",
                  "https://github.com/pytorch/pytorch"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"hidden": 32, "kv_dim": 16, "ffn": 48},
           "default": {"hidden": 2048, "kv_dim": 512, "ffn": 8192}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
)
