"""GraphStorm link-prediction evaluation: every rank's scores shared, positives ranked."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _share(data: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    # broadcast_data: the row counts are summed from one-hot vectors, then every rank sends its
    # whole block to every rank through one uneven all-to-all.
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    sizes = torch.zeros(world, dtype=torch.int64, device=data.device)
    sizes[rank] = data.shape[0]
    dist.all_reduce(sizes, group=group)
    counts = sizes.tolist()
    send = data.repeat((world,) + (1,) * (data.dim() - 1))
    recv = torch.empty((sum(counts),) + tuple(data.shape[1:]), dtype=data.dtype, device=data.device)
    dist.all_to_all_single(recv, send, output_split_sizes=counts,
                           input_split_sizes=[data.shape[0]] * world, group=group)
    return recv


def reference(pos_scores: torch.Tensor, neg_scores: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # pos_scores [p], neg_scores [p, N]: this rank's test edges and the N corrupted edges scored
    # against each. Returns the rank of every positive among its negatives, for all ranks'
    # edges in rank order, [sum p] int64, on every rank (1 = scored above every negative).
    pos = _share(pos_scores, group)
    neg = _share(neg_scores, group)
    # calc_ranking sorts sigmoid(score) descending and finds the positive's place; sigmoid is
    # monotonic, so count the negatives strictly above it (a tie counts in the positive's favour,
    # which a stable sort with the positive first gives).
    return 1 + (neg > pos.unsqueeze(1)).sum(dim=1)


def _edges(case: Case) -> int:
    # Test edges are not spread evenly over the partitions: odd ranks hold a quarter more.
    return case["edges"] + (case["edges"] // 4 if case.rank % 2 else 0)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    p = _edges(case)
    return {"pos_scores": case.randn(p, stream="pos", std=2.0),
            "neg_scores": case.randn(p, case["negatives"], stream="neg", std=2.0)}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    total = sum(s["edges"] + (s["edges"] // 4 if r % 2 else 0) for r in range(n))
    row = (s["negatives"] + 1) * s.itemsize
    # Every rank needs every other rank's scores; the largest share it already has is its own.
    own_least = s["edges"] * row
    return Traffic(link_bytes=total * row - own_least,
                   hbm_bytes=total * row + total * 8,
                   flops=total * s["negatives"])


PROBLEM = Problem(
    id=1109,
    slug="graphstorm-negative-ranking",
    title="GraphStorm distributed link-prediction ranking against negatives",
    description=(
        "GraphStorm evaluates link prediction on a partitioned graph by scoring each rank's test "
        "edges and, for each, N corrupted (negative) edges; to compute MRR and hits@k over the "
        "whole test set it shares the scores: broadcast_data all-reduces a one-hot vector of "
        "row counts and sends every rank's block to every rank through an uneven all-to-all, "
        "after which calc_ranking sorts each positive with its negatives and takes the "
        "positive's place. The exchange moves a [edges, N] score matrix from every partition "
        "to all of them with sizes known only after the count reduction, and the sort is far "
        "more work than needed: a fast kernel counts the negatives above each positive as the "
        "peers' rows arrive."
    ),
    categories=("graph",),
    source=Source("GraphStorm", "python/graphstorm/eval/utils.py: broadcast_data, calc_ranking",
                  "https://github.com/awslabs/graphstorm"),
    collectives=("all_reduce", "all_to_all"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"edges": 12, "negatives": 16}, "default": {"edges": 4096, "negatives": 1024}},
    # The output is integer ranks: equal or wrong.
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    tags=("inference", "evaluation", "variable-size"),
    pkb_ids=(69,),
)
