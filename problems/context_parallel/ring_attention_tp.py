"""Ring attention inside a tensor-parallel attention layer: heads split over TP, sequence over CP."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import groups, traffic
from problems.context_parallel.ring_forward import (
    causal_attention_flops, ring_attention, ring_link_bytes)
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def tp_size(world: int) -> int:
    # 2 ranks: the ring takes both (TP 1); larger worlds: TP 2 and the rest is the ring.
    return 1 if world == 2 else 2


def reference(hidden: torch.Tensor, w_qkv: torch.Tensor, w_o: torch.Tensor, num_heads: int, *,
              tp_group: dist.ProcessGroup, cp_group: dist.ProcessGroup) -> torch.Tensor:
    # hidden [B, S/cp, D]: this CP rank's chunk of the sequence, the same on the ranks of a TP
    # group. w_qkv [3 * H/tp * hd, D]: the column shard holding q, k, v of this rank's heads;
    # w_o [D, H/tp * hd]: the row shard. Returns the layer output [B, S/cp, D], summed over TP.
    b, s, _ = hidden.shape
    heads = num_heads // dist.get_world_size(tp_group)
    q, k, v = (hidden @ w_qkv.T).view(b, s, 3, heads, -1).unbind(dim=2)
    context = ring_attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True,
                             cp_group=cp_group)
    out = context.reshape(b, s, -1) @ w_o.T
    # RowParallelLinear: the partial outputs of the TP ranks' heads are summed.
    dist.all_reduce(out, group=tp_group)
    return out


def make_inputs(case: Case) -> dict[str, object]:
    tp = tp_size(case.world_size)
    cp = case.world_size // tp
    tp_rank = case.rank % tp  # groups.cp_tp: TP ranks are consecutive
    cp_rank = case.rank // tp
    dim, heads, hd = case["hidden"], case["heads"], case["head_dim"]
    width = heads // tp * hd
    # The full weights are shared; each rank takes its heads' rows of q, k, v and columns of o.
    w_qkv = case.randn(3, heads * hd, dim, stream="w_qkv", shared=True, std=dim ** -0.5)
    w_o = case.randn(dim, heads * hd, stream="w_o", shared=True, std=(heads * hd) ** -0.5)
    cols = slice(tp_rank * width, (tp_rank + 1) * width)
    return {"hidden": case.randn(case["batch"], case["seq"] // cp, dim,
                                 stream=f"hidden_cp{cp_rank}", shared=True),
            "w_qkv": w_qkv[:, cols].reshape(3 * width, dim).contiguous(),
            "w_o": w_o[:, cols].contiguous(),
            "num_heads": heads}


def roofline(s: Setting) -> Traffic:
    tp = tp_size(s.world_size)
    cp = s.world_size // tp
    b, dim, hd = s["batch"], s["hidden"], s["head_dim"]
    heads = s["heads"] // tp
    local = s["seq"] // cp
    act = b * local * dim * s.itemsize
    weights = 4 * heads * hd * dim * s.itemsize
    gemm = 2 * b * local * dim * 4 * heads * hd
    return Traffic(link_bytes=ring_link_bytes(b, local, heads, hd, s.itemsize, cp)
                   + traffic.all_reduce(act, tp),
                   hbm_bytes=2 * act + weights,
                   flops=gemm + causal_attention_flops(b, local, s["seq"], heads, hd,
                                                       1.0 - 0.5 / cp))


PROBLEM = Problem(
    id=715,
    slug="ring-attention-tp",
    title="Ring attention composed with tensor parallelism (attention layer)",
    description=(
        "Long-context training combines context parallelism with Megatron-LM tensor "
        "parallelism: the sequence is cut into chunks over the CP ranks, and within each CP "
        "rank the attention heads are split over a TP group. The layer projects the chunk to "
        "q, k, v with a column-parallel weight (this rank's heads), runs causal ring attention "
        "over the CP group for those heads (K/V blocks passed around the ring with "
        "batch_isend_irecv), projects the context with a row-parallel output weight and "
        "all-reduces the partial outputs over TP. Two different groups are on the critical "
        "path: the ring's point-to-point traffic overlaps the per-block attention, and the TP "
        "all-reduce can only start once the ring is done; on 2 ranks the ring takes both (TP 1), "
        "on 4 and 8 ranks TP is 2."
    ),
    categories=("context", "tensor"),
    source=Source("Megatron-LM", "megatron/core/transformer/attention.py: Attention.forward with "
                  "context_parallel_size > 1 (TransformerEngine attn_forward_func_with_cp, p2p)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("send_recv", "all_reduce"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq": 32, "hidden": 32, "heads": 4, "head_dim": 8},
           "default": {"batch": 1, "seq": 8192, "hidden": 4096, "heads": 32, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=lambda world: groups.cp_tp(world, tp_size(world)),
    pkb_ids=(55,),
)
