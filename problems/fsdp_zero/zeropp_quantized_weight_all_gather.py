"""ZeRO++ qwZ: ZeRO-3 parameter all-gather with blockwise int8 quantization. The partitions of
all parameters of a module are concatenated, quantized in fixed-size groups, the int8 values and
the per-group scales are all-gathered, and the result is dequantized into the full parameters
(DeepSpeed partition_parameters all_gather_coalesced with zero_quantized_weights)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def layer_shapes(hidden: int, kv_dim: int, ffn: int) -> list[tuple[str, int, int]]:
    return [("input_layernorm", hidden, 0), ("q_proj", hidden, hidden), ("k_proj", kv_dim, hidden),
            ("v_proj", kv_dim, hidden), ("o_proj", hidden, hidden),
            ("post_attention_layernorm", hidden, 0), ("gate_proj", ffn, hidden),
            ("up_proj", ffn, hidden), ("down_proj", hidden, ffn)]


def reference(input_layernorm: torch.Tensor, q_proj: torch.Tensor, k_proj: torch.Tensor,
              v_proj: torch.Tensor, o_proj: torch.Tensor, post_attention_layernorm: torch.Tensor,
              gate_proj: torch.Tensor, up_proj: torch.Tensor, down_proj: torch.Tensor,
              group_size: int, *, group: dist.ProcessGroup) -> tuple[torch.Tensor, ...]:
    world = dist.get_world_size(group)
    parts = [input_layernorm, q_proj, k_proj, v_proj, o_proj, post_attention_layernorm,
             gate_proj, up_proj, down_proj]
    dtype = q_proj.dtype
    # Each input is this rank's partition of one parameter, stored with the parameter's
    # trailing dims (rank r holds rows [r * rows/N, (r+1) * rows/N)); DeepSpeed concatenates the
    # partitions of every parameter in the module into one flat buffer.
    flat = torch.cat([p.reshape(-1) for p in parts]).float()
    # Symmetric int8 quantization in groups of `group_size` elements (groups may straddle
    # parameter boundaries): scale = absmax / 127, q = round(x / scale).
    blocks = flat.view(-1, group_size)
    scale = blocks.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    q = torch.round(blocks / scale[:, None]).clamp(-127, 127).to(torch.int8)
    # Two all-gathers: the int8 payload and the fp32 scales.
    q_all = torch.empty(world * q.numel(), dtype=torch.int8, device=q.device)
    dist.all_gather_into_tensor(q_all, q.reshape(-1), group=group)
    s_all = torch.empty(world * scale.numel(), dtype=torch.float32, device=q.device)
    dist.all_gather_into_tensor(s_all, scale, group=group)
    # Dequantize all ranks' partitions, then stitch each parameter from its per-rank pieces.
    deq = (q_all.view(-1, group_size).float() * s_all[:, None]).to(dtype).view(world, -1)
    outs = []
    offset = 0
    for p in parts:
        n = p.numel()
        outs.append(deq[:, offset:offset + n].reshape(world * p.shape[0], *p.shape[1:]).contiguous())
        offset += n
    return tuple(outs)


def make_inputs(case: Case) -> dict[str, object]:
    world = case.world_size
    inputs: dict[str, object] = {}
    for name, rows, cols in layer_shapes(case["hidden"], case["kv_dim"], case["ffn"]):
        shape = (rows // world,) if cols == 0 else (rows // world, cols)
        inputs[name] = case.randn(*shape, stream=name, std=0.02)
    inputs["group_size"] = case["group_size"]
    return inputs


def _numel(s: Setting) -> int:
    return sum(r * max(c, 1) for _, r, c in layer_shapes(s["hidden"], s["kv_dim"], s["ffn"]))


def roofline(s: Setting) -> Traffic:
    numel = _numel(s)
    groups = numel // s["group_size"]
    wire = numel + 4 * groups  # int8 payload plus fp32 scales, gathered
    return Traffic(link_bytes=traffic.all_gather(wire, s.world_size),
                   hbm_bytes=numel / s.world_size * s.itemsize + numel * s.itemsize,
                   flops=3 * numel / s.world_size + numel)


PROBLEM = Problem(
    id=306,
    slug="zeropp-quantized-weight-all-gather",
    title="ZeRO++ quantized weight all-gather (qwZ, blockwise int8)",
    description=(
        "ZeRO++'s quantized weight communication (zero_quantized_weights) halves the ZeRO-3 "
        "forward parameter all-gather: when a module is fetched, DeepSpeed concatenates the "
        "rank's partitions of all its parameters, quantizes them to int8 in fixed-size groups "
        "with one symmetric scale per group, all-gathers the int8 payload and the scales, and "
        "dequantizes the gathered buffer back to bf16 before splitting it into the module's "
        "parameters (here one Llama decoder layer, about 208 MiB of int8 on the wire). The "
        "gather is on the critical path of every layer's forward and the quantize and "
        "dequantize kernels are separate passes on either side of it; a fast kernel quantizes "
        "while sending and dequantizes straight into each parameter as peers' bytes land."
    ),
    categories=("fsdp_zero", "data"),
    source=Source("DeepSpeed",
                  "deepspeed/runtime/zero/partition_parameters.py: Init._convert_to_deepspeed_param.all_gather_coalesced (quantize=True), CUDAQuantizer",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    # The per-rank concatenated partition must be a multiple of group_size at every world size.
    sizes={"small": {"hidden": 32, "kv_dim": 16, "ffn": 48, "group_size": 8},
           "default": {"hidden": 4096, "kv_dim": 1024, "ffn": 14336, "group_size": 1024}},
    # One quantization step (absmax/127, about 8e-4 here) is allowed where rounding ties differ.
    tolerances=tolerances(bfloat16=(1.5e-3, 1e-2), float32=(1.5e-3, 1e-4)),
    traffic=roofline,
)
