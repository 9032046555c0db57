"""FSDP2 float8 weight all-gather (torchao): one all-reduce of per-weight amax gives a
tensor-wise scale for every Float8Linear weight, each rank casts its shard to float8_e4m3fn,
and the fp8 bytes of all weights are all-gathered in one collective."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

E4M3_MAX = 448.0
AMAX_EPS = 1e-12


def linear_shapes(hidden: int, kv_dim: int, ffn: int) -> list[tuple[str, int, int]]:
    return [("wq", hidden, hidden), ("wk", kv_dim, hidden), ("wv", kv_dim, hidden),
            ("wo", hidden, hidden), ("w1", ffn, hidden), ("w3", ffn, hidden), ("w2", hidden, ffn)]


def reference(wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor, wo: torch.Tensor,
              w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    world = dist.get_world_size(group)
    shards = [wq, wk, wv, wo, w1, w3, w2]
    # precompute_float8_dynamic_scale_for_fsdp: the global amax of every weight in one
    # all-reduce (MAX), then scale = fp8_max / amax, correctly rounded to fp32 (torchao divides
    # in fp64; `float / fp32 tensor` in eager PyTorch is reciprocal-then-multiply, 1 ulp off).
    amax = torch.stack([s.abs().max().float() for s in shards])
    dist.all_reduce(amax, op=dist.ReduceOp.MAX, group=group)
    scales = (E4M3_MAX / amax.double().clamp(min=AMAX_EPS)).float()
    # fsdp_pre_all_gather: scale in fp32, saturate, cast to e4m3; the bytes travel as uint8.
    fp8 = [(s.float() * scales[i]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
           for i, s in enumerate(shards)]
    send = torch.cat([t.reshape(-1).view(torch.uint8) for t in fp8])
    recv = torch.empty(world * send.numel(), dtype=torch.uint8, device=send.device)
    dist.all_gather_into_tensor(recv, send, group=group)
    # fsdp_post_all_gather: unsharded fp8 weights (stored here as their uint8 bit patterns);
    # the matching scales are returned alongside for the scaled matmul.
    per_rank = recv.view(world, -1)
    outs = []
    offset = 0
    for s in shards:
        n = s.numel()
        outs.append(per_rank[:, offset:offset + n].reshape(world * s.shape[0], s.shape[1]).contiguous())
        offset += n
    return (*outs, scales)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    world = case.world_size
    return {name: case.randn(rows // world, cols, stream=name, std=0.02)
            for name, rows, cols in linear_shapes(case["hidden"], case["kv_dim"], case["ffn"])}


def roofline(s: Setting) -> Traffic:
    numel = sum(r * c for _, r, c in linear_shapes(s["hidden"], s["kv_dim"], s["ffn"]))
    shard = numel / s.world_size
    # Gather numel fp8 bytes plus the 7-float amax all-reduce. HBM lower bound: the shard read
    # once, the unsharded fp8 weights written once.
    return Traffic(link_bytes=traffic.all_gather(numel, s.world_size) + traffic.all_reduce(28, s.world_size),
                   hbm_bytes=shard * s.itemsize + numel,
                   flops=3 * shard)


PROBLEM = Problem(
    id=305,
    slug="float8-fsdp-all-gather",
    title="Float8 FSDP2 weight all-gather with tensor-wise dynamic scales",
    description=(
        "torchao's float8 training with FSDP2 (enable_fsdp_float8_all_gather, "
        "precompute_float8_dynamic_scale_for_fsdp) halves the parameter all-gather: before "
        "each block's forward, the high-precision weight shards of every Float8Linear get one "
        "tensor-wise scale from a single all-reduce (MAX) of all their amaxes, each rank scales, "
        "saturates and casts its shards to float8_e4m3fn in fsdp_pre_all_gather, and the fp8 "
        "bytes of all seven weights are all-gathered in one collective; fsdp_post_all_gather "
        "wraps the unsharded bytes with their scales for the scaled matmul. The gather "
        "(about 200 MiB of fp8 for a Llama-3-8B block) is on the forward critical path of every "
        "block; a fast kernel fuses amax, scaling and cast into the send and overlaps the tiny "
        "amax all-reduce with reading the shard. Outputs: the unsharded fp8 weights as their "
        "uint8 bit patterns (compared exactly), then the seven fp32 scales."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("torchao",
                  "torchao/float8/fsdp_utils.py: WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather",
                  "https://github.com/pytorch/ao"),
    collectives=("all_reduce", "all_gather"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"hidden": 32, "kv_dim": 16, "ffn": 48},
           "default": {"hidden": 4096, "kv_dim": 1024, "ffn": 14336}},
    tolerances=tolerances(bfloat16=(0.0, 1e-6), float32=(0.0, 1e-6)),
    traffic=roofline,
)
