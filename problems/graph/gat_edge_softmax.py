"""Edge-partitioned GAT layer: edge softmax normalised across partitions, aggregation reduced at owner."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(feat_src: torch.Tensor, el: torch.Tensor, er: torch.Tensor,
              nbr_idx: torch.Tensor, dst_ids: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # Edge partition: the edges into dst_ids[i] (unique global ids) held here come from the local
    # source rows nbr_idx[i, :] of feat_src [n_src, H, D] (projected features W h) and
    # el [n_src, H] (a_l . W h_src). er [N, H] (a_r . W h_dst) is known for every node.
    # The softmax over a node's incoming edges spans partitions: max and sum are reduced over
    # all ranks, and the weighted messages are summed at the node's owner.
    world = dist.get_world_size(group)
    n_total, heads = er.shape
    n_local = n_total // world
    dim = feat_src.shape[2]
    logits = F.leaky_relu(el[nbr_idx].float() + er[dst_ids].float().unsqueeze(1), 0.2)  # [m, K, H]
    node_max = torch.full((n_total, heads), float("-inf"), dtype=torch.float32, device=er.device)
    node_max[dst_ids] = logits.amax(1)
    dist.all_reduce(node_max, op=dist.ReduceOp.MAX, group=group)
    ex = torch.exp(logits - node_max[dst_ids].unsqueeze(1))
    node_sum = torch.zeros((n_total, heads), dtype=torch.float32, device=er.device)
    node_sum[dst_ids] = ex.sum(1)
    dist.all_reduce(node_sum, op=dist.ReduceOp.SUM, group=group)
    alpha = ex / node_sum[dst_ids].unsqueeze(1)
    # Weighted aggregation of this partition's edges, fp32 over the K slots in order.
    acc = torch.zeros((dst_ids.shape[0], heads, dim), dtype=torch.float32, device=er.device)
    for j in range(nbr_idx.shape[1]):
        acc += alpha[:, j, :, None] * feat_src[nbr_idx[:, j]].float()
    partial = torch.zeros((n_total, heads, dim), dtype=feat_src.dtype, device=er.device)
    partial[dst_ids] = acc.to(feat_src.dtype)
    out = torch.empty((n_local, heads, dim), dtype=feat_src.dtype, device=er.device)
    dist.reduce_scatter_tensor(out, partial, op=dist.ReduceOp.SUM, group=group)
    return alpha.to(feat_src.dtype), out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n_total = case["nodes_per_rank"] * case.world_size
    m, n_src, k = case["dst_per_rank"], case["src_per_rank"], case["fanin"]
    heads, dim = case["heads"], case["head_dim"]
    return {
        "feat_src": case.randn(n_src, heads, dim, stream="feat_src"),
        "el": case.randn(n_src, heads, stream="el"),
        "er": case.randn(n_total, heads, stream="er", shared=True),
        "nbr_idx": case.randint(0, n_src, m, k, stream="nbr"),
        "dst_ids": case.randperm(n_total, stream="dst")[:m],
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    n_total = s["nodes_per_rank"] * n
    m, k, heads, dim = s["dst_per_rank"], s["fanin"], s["heads"], s["head_dim"]
    stats = n_total * heads * 4  # one fp32 [N, H] buffer
    dense = n_total * heads * dim * s.itemsize
    # Dense collectives as written; a sparse exchange of touched rows would move less.
    link = 2 * traffic.all_reduce(stats, n) + traffic.reduce_scatter(dense, n)
    hbm = (m * k * heads * dim * s.itemsize + m * k * (8 + heads * s.itemsize)
           + m * k * heads * s.itemsize + 4 * stats + dense + dense // n)
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=m * k * heads * (2 * dim + 8))


PROBLEM = Problem(
    id=1106,
    slug="gat-edge-softmax-partitioned",
    title="Edge-partitioned GAT: cross-partition edge softmax and owner reduction",
    description=(
        "A graph attention layer normalises attention logits over each node's incoming edges "
        "(DGL's edge_softmax). When edges are partitioned, as in vertex-cut full-graph training, "
        "a node's incoming edges live on several ranks, so the softmax needs the per-node "
        "maximum and the per-node sum of exponentials reduced across all partitions before any "
        "rank can normalise its local edges, and the attention-weighted messages are then "
        "summed at the node's owner. The reference does this with two dense all-reduces of "
        "[N, heads] statistics and a reduce-scatter of [N, heads, D] partials; a fast kernel "
        "exchanges only the rows each partition touches and fuses the max, sum and weighted "
        "aggregation passes around the communication."
    ),
    categories=("graph",),
    source=Source("DGL", "python/dgl/ops/edge_softmax.py: edge_softmax (as used by GATConv)",
                  "https://github.com/dmlc/dgl"),
    collectives=("all_reduce", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"nodes_per_rank": 32, "dst_per_rank": 40, "src_per_rank": 64, "fanin": 4,
                     "heads": 2, "head_dim": 8},
           "default": {"nodes_per_rank": 1 << 17, "dst_per_rank": 1 << 17,
                       "src_per_rank": 1 << 17, "fanin": 8, "heads": 4, "head_dim": 32}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
)
