"""DeepEP low-latency dispatch for decoding: per-expert fixed-size receive buffers."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, topk_idx: torch.Tensor, num_experts: int, *,
              group: dist.ProcessGroup):
    """Dispatch T decode tokens into [E_local, world*T, H] per-expert buffers.

    Rank r owns experts [r*E_local, (r+1)*E_local). For local expert l the rows are packed from
    slot 0, ordered by source rank then source token index; slots past the count are zero.
    Returns recv_x [E_local, world*T, H], recv_count [E_local] int64, and recv_src_info
    [E_local, world*T] int64 (src_rank * T + token for filled slots, -1 for empty ones).
    """
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // world
    slots = world * tokens

    flat_expert = topk_idx.reshape(-1)
    flat_token = torch.arange(tokens * k, device=x.device) // k
    order = torch.argsort(flat_expert * tokens + flat_token)
    send_token = flat_token[order]
    send_x = x.index_select(0, send_token)
    send_src = send_token + rank * tokens

    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=group)
    input_splits = counts.view(world, local_experts).sum(1).tolist()
    recv_matrix = recv_counts.view(world, local_experts)           # [source rank, local expert]
    output_splits = recv_matrix.sum(1).tolist()
    received = sum(output_splits)

    got_x = x.new_empty((received, x.shape[1]))
    dist.all_to_all_single(got_x, send_x, output_splits, input_splits, group=group)
    got_src = send_src.new_empty((received,))
    dist.all_to_all_single(got_src, send_src, output_splits, input_splits, group=group)

    # Received rows are in (source rank, local expert, token) order; place each in its
    # expert's buffer after the rows of lower source ranks.
    chunk_expert = torch.arange(local_experts, device=x.device).repeat(world)
    chunk_sizes = recv_matrix.reshape(-1)
    row_expert = torch.repeat_interleave(chunk_expert, chunk_sizes)
    before_rank = torch.cumsum(recv_matrix, 0) - recv_matrix        # rows of lower ranks
    chunk_base = before_rank.reshape(-1)
    chunk_start = torch.cumsum(chunk_sizes, 0) - chunk_sizes
    within = torch.arange(received, device=x.device) - torch.repeat_interleave(chunk_start, chunk_sizes)
    row_slot = torch.repeat_interleave(chunk_base, chunk_sizes) + within

    recv_x = x.new_zeros((local_experts, slots, x.shape[1]))
    recv_x[row_expert, row_slot] = got_x
    recv_src_info = torch.full((local_experts, slots), -1, dtype=torch.int64, device=x.device)
    recv_src_info[row_expert, row_slot] = got_src
    return recv_x, recv_matrix.sum(0), recv_src_info


def make_inputs(case: Case) -> dict:
    tokens, experts, k = case["tokens"], case["experts"], case["topk"]
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    _, idx = torch.topk(logits, k, dim=-1)
    return {
        "x": case.randn(tokens, case["hidden"], stream="x"),
        "topk_idx": idx,
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden, experts, k = s.world_size, s["tokens"], s["hidden"], s["experts"], s["topk"]
    row = hidden * s.itemsize
    local = experts // n
    # Low-latency mode sends one copy per (token, expert) pair (no dedup); remote pairs only.
    remote_pairs = tokens * k * (n - 1) / n
    link = remote_pairs * (row + 8)
    # The whole fixed-size buffer is written (filled rows plus zeroed slots).
    hbm = tokens * row + local * n * tokens * (row + 8) + tokens * k * 8
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=1006,
    slug="moe-low-latency-dispatch",
    title="DeepEP low-latency dispatch (decode, fixed per-expert buffers)",
    description=(
        "During MoE decoding each rank holds only ~128 tokens, so dispatch is latency-bound, "
        "not bandwidth-bound. DeepEP's low_latency_dispatch skips the count exchange on the "
        "critical path: every rank writes each (token, expert) row straight into a fixed-size "
        "slot region of the owning rank's buffer [E_local, world*T_max, H] and signals a count, "
        "and the result feeds a masked grouped GEMM that reads the per-expert counts. The output "
        "here is that layout with a defined order (per expert: source rank, then token; unused "
        "slots zero) plus counts and source ids. The reference needs a count all-to-all, two "
        "uneven all-to-alls and a scatter; a fast kernel is a single launch of direct peer "
        "stores plus flag writes, finishing in tens of microseconds, and is CUDA-graph capturable. Shapes follow DeepSeek-V2-Lite "
        "(hidden 2048, 64 experts, top-6) so that the mandatory zero fill of unused slots (32 MiB) stays small."
    ),
    categories=("expert",),
    source=Source("DeepEP", "deep_ep/buffer.py: Buffer.low_latency_dispatch",
                  "https://github.com/deepseek-ai/DeepEP"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 8, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 128, "hidden": 2048, "experts": 64, "topk": 6}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    tags=("inference", "latency"),
)
