"""MoE dispatch with expert tensor parallelism: all-to-all in EP, then all-gather in TP (Megatron)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.groups import ep_tp
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _gather_uneven(t: torch.Tensor, sizes: list[int], group) -> list[torch.Tensor]:
    """All-gather rows whose count differs per rank: pad to the largest, gather, trim."""
    most = max(sizes)
    padded = t.new_zeros((most, *t.shape[1:]))
    padded[: t.shape[0]] = t
    out = t.new_empty((len(sizes) * most, *t.shape[1:]))
    dist.all_gather_into_tensor(out, padded, group=group)
    return [out[i * most: i * most + n] for i, n in enumerate(sizes)]


def reference(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
              num_experts: int, *, tp_group: dist.ProcessGroup, ep_group: dist.ProcessGroup):
    """Every TP rank of the EP rank owning an expert receives all rows routed to it.

    Each rank holds its own tokens x [T, H] (sequence-parallel shard). Experts are spread over
    the EP group (EP rank r owns [r*E_local, (r+1)*E_local)) and every expert is sharded over the
    TP group, so the rows first travel by all-to-all inside the EP group (to the same TP slot of
    the owning EP rank) and are then all-gathered across the TP group. Output row order: local
    expert, then source TP rank, then source EP rank, then source token index. Returns recv_x
    [R, H], recv_weights [R] float32, tokens_per_expert [E_local] int64 and recv_src_index [R]
    int64 (= global rank of the source * T + token).
    """
    ep, tp = dist.get_world_size(ep_group), dist.get_world_size(tp_group)
    tokens, k = topk_idx.shape
    local_experts = num_experts // ep
    hidden = x.shape[1]

    flat_expert = topk_idx.reshape(-1)
    flat_token = torch.arange(tokens * k, device=x.device) // k
    order = torch.argsort(flat_expert * tokens + flat_token)
    send_token = flat_token[order]
    send_x = x.index_select(0, send_token)
    send_w = topk_weights.reshape(-1)[order].float()
    send_src = send_token + dist.get_rank() * tokens

    counts = torch.bincount(flat_expert, minlength=num_experts).to(torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts, group=ep_group)
    in_splits = counts.view(ep, local_experts).sum(1).tolist()
    out_splits = recv_counts.view(ep, local_experts).sum(1).tolist()
    received = sum(out_splits)
    got_x = x.new_empty((received, hidden))
    dist.all_to_all_single(got_x, send_x, out_splits, in_splits, group=ep_group)
    got_w = send_w.new_empty((received,))
    dist.all_to_all_single(got_w, send_w, out_splits, in_splits, group=ep_group)
    got_src = send_src.new_empty((received,))
    dist.all_to_all_single(got_src, send_src, out_splits, in_splits, group=ep_group)

    # TP all-gather (gather_from_sequence_parallel_region with output_split_sizes).
    all_counts = recv_counts.new_empty((tp * ep * local_experts,))
    dist.all_gather_into_tensor(all_counts, recv_counts, group=tp_group)
    m = all_counts.view(tp, ep, local_experts)
    sizes = m.sum((1, 2)).tolist()
    parts_x = _gather_uneven(got_x, sizes, tp_group)
    parts_w = _gather_uneven(got_w, sizes, tp_group)
    parts_s = _gather_uneven(got_src, sizes, tp_group)

    # Chunks (tp i, ep s, expert l) -> sorted by (l, i, s).
    def expert_major(parts: list[torch.Tensor]) -> torch.Tensor:
        chunks = []
        for i, part in enumerate(parts):
            chunks.append(part.split(m[i].reshape(-1).tolist(), 0))
        return torch.cat([chunks[i][s * local_experts + l] for l in range(local_experts)
                          for i in range(tp) for s in range(ep)], 0)

    return expert_major(parts_x), expert_major(parts_w), m.sum((0, 1)), expert_major(parts_s)


def _tp(world_size: int) -> int:
    return 2 if world_size >= 4 else 1


def make_inputs(case: Case) -> dict:
    tokens, experts, k = case["tokens"], case["experts"], case["topk"]
    logits = case.randn(tokens, experts, stream="router", dtype=torch.float32)
    weights, idx = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    return {
        "x": case.randn(tokens, case["hidden"], stream="x"),
        "topk_idx": idx,
        "topk_weights": weights / weights.sum(-1, keepdim=True),
        "num_experts": experts,
    }


def roofline(s: Setting) -> Traffic:
    tp = _tp(s.world_size)
    ep = s.world_size // tp
    tokens, hidden, experts, k = s["tokens"], s["hidden"], s["experts"], s["topk"]
    row = hidden * s.itemsize
    local = experts // ep
    remote = (ep - 1) * (1 - math.comb(experts - local, k) / math.comb(experts, k))
    a2a = tokens * remote * (row + 12 * k)
    # Each TP rank ends with the rows of all TP peers: T*k*tp pairs expected.
    gathered = tokens * k * tp * (row + 12)
    link = a2a + traffic.all_gather(gathered, tp)
    hbm = tokens * row + gathered + tokens * k * row
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=1011,
    slug="moe-dispatch-ep-tp",
    title="MoE dispatch with expert tensor parallelism (EP all-to-all + TP all-gather)",
    description=(
        "Megatron's all-to-all dispatcher when experts are also tensor-parallel (expert TP > 1): "
        "ranks form a TP x EP grid (TP innermost), each TP rank holds a sequence-parallel slice "
        "of the tokens, and each expert's FFN is sharded across the TP group, so every TP rank "
        "of the owning EP rank needs every row routed to that expert. The dispatcher permutes, "
        "exchanges counts, runs the uneven all-to-all inside the EP group, all-gathers the "
        "received rows (uneven sizes) across the TP group and sorts them by local expert. Two "
        "dependent collectives on two different groups sit on the critical path; fast versions "
        "fuse them into one exchange where each sender writes its rows directly into all TP "
        "replicas of the destination, in expert-major position. TP is 2 on 4 and 8 ranks and 1 "
        "on 2 ranks (pure EP)."
    ),
    categories=("expert", "tensor"),
    source=Source("Megatron-LM",
                  "megatron/core/transformer/moe/token_dispatcher.py: MoEAlltoAllTokenDispatcher.token_permutation "
                  "(tp_size > 1: gather_from_sequence_parallel_region with output_split_sizes)",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_to_all", "all_gather"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 24, "hidden": 32, "experts": 16, "topk": 4},
           "default": {"tokens": 2048, "hidden": 4096, "experts": 64, "topk": 4}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    process_groups=lambda world_size: ep_tp(world_size, _tp(world_size)),
    world_size_note="TP is 2 on 4 and 8 ranks, 1 on 2 ranks",
)
