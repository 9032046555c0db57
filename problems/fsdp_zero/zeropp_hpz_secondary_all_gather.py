"""ZeRO++ hpZ: in backward, ZeRO-3 parameters are re-gathered from the secondary partition that
every rank keeps inside its node group, so the all-gather runs over the intra-node group only
(DeepSpeed partition_parameters all_gather_coalesced with ds_secondary_tensor)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.groups import grid
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def hpz_size(world_size: int) -> int:
    # zero_hpz_partition_size: the GPUs of one "node"; two nodes from 4 ranks up.
    return world_size if world_size <= 2 else world_size // 2


def hpz_groups(world_size: int) -> GroupLayout:
    node_groups, _ = grid(world_size, hpz_size(world_size))
    return {"hpz_group": node_groups}


def layer_shapes(hidden: int, kv_dim: int, ffn: int) -> list[tuple[str, int, int]]:
    return [("input_layernorm", hidden, 0), ("q_proj", hidden, hidden), ("k_proj", kv_dim, hidden),
            ("v_proj", kv_dim, hidden), ("o_proj", hidden, hidden),
            ("post_attention_layernorm", hidden, 0), ("gate_proj", ffn, hidden),
            ("up_proj", ffn, hidden), ("down_proj", hidden, ffn)]


def reference(input_layernorm: torch.Tensor, q_proj: torch.Tensor, k_proj: torch.Tensor,
              v_proj: torch.Tensor, o_proj: torch.Tensor, post_attention_layernorm: torch.Tensor,
              gate_proj: torch.Tensor, up_proj: torch.Tensor, down_proj: torch.Tensor, *,
              hpz_group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    size = dist.get_world_size(hpz_group)
    # Each input is this rank's flat secondary partition of one parameter: the parameter,
    # flattened, split into `size` equal pieces across the node group.
    parts = [input_layernorm, q_proj, k_proj, v_proj, o_proj, post_attention_layernorm,
             gate_proj, up_proj, down_proj]
    send = torch.cat(parts)
    recv = torch.empty(size * send.numel(), dtype=send.dtype, device=send.device)
    dist.all_gather_into_tensor(recv, send, group=hpz_group)
    per_rank = recv.view(size, -1)
    shapes = _full_shapes(parts, size)
    outs = []
    offset = 0
    for p, shape in zip(parts, shapes):
        n = p.numel()
        outs.append(per_rank[:, offset:offset + n].reshape(shape).contiguous())
        offset += n
    return tuple(outs)


def _full_shapes(parts: list[torch.Tensor], size: int) -> list[tuple[int, ...]]:
    # The parameters' shapes (ds_shape), recovered from the partition sizes.
    hidden = parts[0].numel() * size
    kv_dim = parts[2].numel() * size // hidden
    ffn = parts[6].numel() * size // hidden
    return [(r, c) if c else (r,) for _, r, c in layer_shapes(hidden, kv_dim, ffn)]


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    size = hpz_size(case.world_size)
    return {name: case.randn(rows * max(cols, 1) // size, stream=name, std=0.02)
            for name, rows, cols in layer_shapes(case["hidden"], case["kv_dim"], case["ffn"])}


def roofline(s: Setting) -> Traffic:
    numel = sum(r * max(c, 1) for _, r, c in layer_shapes(s["hidden"], s["kv_dim"], s["ffn"]))
    nbytes = numel * s.itemsize
    h = hpz_size(s.world_size)
    return Traffic(link_bytes=traffic.all_gather(nbytes, h), hbm_bytes=nbytes / h + nbytes)


PROBLEM = Problem(
    id=307,
    slug="zeropp-hpz-secondary-all-gather",
    title="ZeRO++ hierarchical partitioning (hpZ): intra-node backward parameter all-gather",
    description=(
        "ZeRO++'s hierarchical weight partitioning (zero_hpz_partition_size) keeps, besides the "
        "primary ZeRO-3 partition over all data-parallel ranks, a secondary partition of every "
        "parameter over the GPUs of one node. The backward pass re-gathers each module's "
        "parameters from these secondary partitions: DeepSpeed concatenates the rank's flat "
        "secondary pieces of all the module's parameters, all-gathers them inside the node "
        "group only, and cuts each parameter out of the per-rank pieces. The gather of one "
        "Llama-3-8B decoder layer (about 416 MiB in bf16) repeats for every layer in backward "
        "and moves only over NVLink; a fast kernel reads the peers' pieces directly into the "
        "parameters without the staging buffer. Groups: consecutive ranks form a node group "
        "(2 ranks per node at world size 4, 4 at 8; the whole world at 2)."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("DeepSpeed",
                  "deepspeed/runtime/zero/partition_parameters.py: Init._convert_to_deepspeed_param._all_gather_dtype (ds_secondary_tensor)",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"hidden": 32, "kv_dim": 16, "ffn": 48},
           "default": {"hidden": 4096, "kv_dim": 1024, "ffn": 14336}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    process_groups=hpz_groups,
    tags=("backward",),
)
