"""ZeRO++ qgZ: hierarchical quantized gradient reduce-scatter (intra-node then inter-node all-to-all)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.groups import grid
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _quantize(x: torch.Tensor, group_size: int):
    """Symmetric int8 quantization per contiguous group: scale = absmax / 127 (fp32),
    q = round_half_even(x / scale) clamped to [-127, 127]."""
    g = x.reshape(*x.shape[:-1], x.shape[-1] // group_size, group_size)
    scale = g.abs().amax(dim=-1, keepdim=True).div_(127.0).clamp_(min=1e-30)
    q = torch.round(g / scale).clamp_(-127, 127).to(torch.int8)
    return q.reshape(x.shape), scale.squeeze(-1)


def _dequantize(q: torch.Tensor, scale: torch.Tensor, group_size: int) -> torch.Tensor:
    g = q.reshape(*q.shape[:-1], q.shape[-1] // group_size, group_size).float()
    return (g * scale.unsqueeze(-1)).reshape(q.shape)


def reference(grad: torch.Tensor, *, local_group: dist.ProcessGroup,
              node_group: dist.ProcessGroup) -> torch.Tensor:
    local, nodes = dist.get_world_size(local_group), dist.get_world_size(node_group)
    world = local * nodes
    gs = GROUP_SIZE[grad.numel() < 2**16]
    shard = grad.numel() // world
    # Final owner of shard s = node * local + l. Intra-node hop: send to local peer l' the
    # shards {n * local + l' for every node n}, int8-quantized.
    x = grad.float().view(nodes, local, shard).transpose(0, 1).contiguous()  # (local, nodes, shard)
    q, s = _quantize(x, gs)
    q_recv, s_recv = torch.empty_like(q), torch.empty_like(s)
    dist.all_to_all_single(q_recv, q, group=local_group)
    dist.all_to_all_single(s_recv, s, group=local_group)
    deq = _dequantize(q_recv, s_recv, gs)  # (local sources, nodes, shard)
    partial = deq[0]
    for src in range(1, local):
        partial = partial + deq[src]
    # Inter-node hop: re-quantize the node-level partial sums, shard of node n goes to node n.
    q2, s2 = _quantize(partial, gs)  # (nodes, shard)
    q2_recv, s2_recv = torch.empty_like(q2), torch.empty_like(s2)
    dist.all_to_all_single(q2_recv, q2, group=node_group)
    dist.all_to_all_single(s2_recv, s2, group=node_group)
    deq2 = _dequantize(q2_recv, s2_recv, gs)  # (node sources, shard)
    total = deq2[0]
    for src in range(1, nodes):
        total = total + deq2[src]
    return (total / world).to(grad.dtype)


GROUP_SIZE = {False: 2048, True: 32}  # quantization group (elements); tiny for the small preset


def _local_size(world_size: int) -> int:
    return max(1, world_size // 2)  # "GPUs per node": 2 nodes at every world size


def layout(world_size: int):
    local_groups, node_groups = grid(world_size, _local_size(world_size))
    return {"local_group": local_groups, "node_group": node_groups}


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"grad": case.randn(case["numel"], stream="grad")}


def roofline(s: Setting) -> Traffic:
    n, world = s["numel"], s.world_size
    local = _local_size(world)
    nodes = world // local
    per_elem = 1 + 4 / GROUP_SIZE[n < 2**16]  # int8 value + its share of an fp32 scale
    link = traffic.all_to_all(n * per_elem, local) + traffic.all_to_all(n / local * per_elem, nodes)
    return Traffic(link_bytes=link, hbm_bytes=n * s.itemsize + n / world * s.itemsize,
                   flops=6 * n)


PROBLEM = Problem(
    id=210,
    slug="zeropp-qgz-quantized-reduce-scatter",
    title="ZeRO++ qgZ: hierarchical int8-quantized gradient reduce-scatter",
    description=(
        "ZeRO++'s qgZ replaces the ZeRO-3 gradient reduce-scatter with a quantized, "
        "hierarchical one: gradients are block-quantized, exchanged with an all-to-all among the "
        "GPUs of a node, dequantized and summed, re-quantized, exchanged with an all-to-all "
        "among the GPUs with the same local index on other nodes, and dequantized and summed "
        "again, so each rank ends with its reduce-scatter shard (averaged over the world) while "
        "the slow inter-node links carry 1 byte per element instead of 2-4. Here the groups "
        "model 2 nodes, quantization is int8 (qgZ uses int4) with one fp32 scale per block of "
        "2048 elements: scale = absmax/127, q = round-half-even(x/scale), sums in fp32 in source "
        "order, so a faithful kernel reproduces it exactly. The reference materialises every "
        "intermediate; a fast kernel fuses quantize, send, dequantize and accumulate."
    ),
    categories=("data", "fsdp_zero"),
    source=Source("DeepSpeed",
                  "deepspeed/runtime/comm/coalesced_collectives.py: all_to_all_quant_reduce",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 64 * 8 * 4}, "default": {"numel": 64 * 2**20}},
    tolerances=tolerances(bfloat16=(1e-2, 1e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=layout,
    tags=("backward",),
)
