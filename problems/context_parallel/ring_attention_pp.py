"""Ring attention inside pipeline stages: each stage's attention layer runs a CP ring, and the
activations pass from stage to stage."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import groups, traffic
from problems.context_parallel.ring_forward import (
    causal_attention_flops, ring_attention, ring_link_bytes)
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

STAGES = 2


def cp_size(world: int) -> int:
    return world // STAGES


def _layout(world: int) -> dict[str, list[list[int]]]:
    # Megatron-LM order: CP ranks consecutive, pipeline stages strided (PP outermost).
    cp_groups, pp_groups = groups.grid(world, cp_size(world))
    return {"cp_group": cp_groups, "pp_group": pp_groups}


def reference(hidden: torch.Tensor, w_qkv: torch.Tensor, w_o: torch.Tensor, num_heads: int, *,
              cp_group: dist.ProcessGroup, pp_group: dist.ProcessGroup) -> torch.Tensor:
    # hidden [B, S/cp, D]: the first stage's input chunk (later stages receive theirs from the
    # previous stage and ignore it). w_qkv [3 * H * hd, D] and w_o [D, H * hd]: this stage's
    # attention weights. Each stage computes x + attention(x) with causal ring attention over
    # its CP group and sends the result on. Returns this stage's output [B, S/cp, D].
    stage, stages = dist.get_rank(pp_group), dist.get_world_size(pp_group)
    x = hidden
    if stage > 0:  # recv_forward
        x = torch.empty_like(hidden)
        dist.recv(x, src=dist.get_global_rank(pp_group, stage - 1), group=pp_group)
    b, s, _ = x.shape
    q, k, v = (x @ w_qkv.T).view(b, s, 3, num_heads, -1).unbind(dim=2)
    context = ring_attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True,
                             cp_group=cp_group)
    out = x + context.reshape(b, s, -1) @ w_o.T
    if stage + 1 < stages:  # send_forward
        dist.send(out, dst=dist.get_global_rank(pp_group, stage + 1), group=pp_group)
    return out


def make_inputs(case: Case) -> dict[str, object]:
    cp = cp_size(case.world_size)
    cp_rank, stage = case.rank % cp, case.rank // cp
    dim, heads, hd = case["hidden"], case["heads"], case["head_dim"]
    return {"hidden": case.randn(case["batch"], case["seq"] // cp, dim, stream=f"hidden_cp{cp_rank}",
                                 shared=True),
            "w_qkv": case.randn(3 * heads * hd, dim, stream=f"w_qkv_stage{stage}", shared=True,
                                std=dim ** -0.5),
            "w_o": case.randn(dim, heads * hd, stream=f"w_o_stage{stage}", shared=True,
                              std=(heads * hd) ** -0.5),
            "num_heads": heads}


def roofline(s: Setting) -> Traffic:
    cp = cp_size(s.world_size)
    b, dim, heads, hd = s["batch"], s["hidden"], s["heads"], s["head_dim"]
    local = s["seq"] // cp
    act = b * local * dim * s.itemsize
    gemm = 2 * b * local * dim * 4 * heads * hd
    # A middle stage receives and sends one activation chunk besides its ring traffic.
    return Traffic(link_bytes=ring_link_bytes(b, local, heads, hd, s.itemsize, cp)
                   + traffic.send_recv(act),
                   hbm_bytes=2 * act + 4 * heads * hd * dim * s.itemsize,
                   flops=gemm + causal_attention_flops(b, local, s["seq"], heads, hd,
                                                       1.0 - 0.5 / cp))


PROBLEM = Problem(
    id=716,
    slug="ring-attention-pp",
    title="Ring attention composed with pipeline parallelism (two stages)",
    description=(
        "With both pipeline and context parallelism (Megatron-LM's PP x CP layouts for long "
        "context), every pipeline stage is itself a ring of CP ranks: a stage receives its "
        "chunk of activations from the same CP position of the previous stage "
        "(recv_forward), runs its attention layer with causal ring attention, whose K/V "
        "blocks circle the stage's CP group, adds the residual and sends the chunk on "
        "(send_forward). The pipeline hand-off is a large point-to-point transfer on the "
        "critical path between two rings; a fast version starts the next stage's QKV "
        "projection on the first rows to arrive and overlaps the ring with it. Two stages; "
        "the CP ring has world/2 ranks (one on 2 GPUs, where only the pipeline remains)."
    ),
    categories=("context", "pipeline"),
    source=Source("Megatron-LM", "megatron/core/pipeline_parallel/schedules.py: "
                  "forward_step with p2p_communication recv_forward/send_forward around a "
                  "context-parallel Attention.forward", "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq": 32, "hidden": 32, "heads": 2, "head_dim": 8},
           "default": {"batch": 1, "seq": 8192, "hidden": 4096, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=_layout,
    pkb_ids=(),
)
