"""DistGNN vertex-cut aggregation: partial sums of split nodes reduced at the owner and sent back."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(src_feat: torch.Tensor, nbr_idx: torch.Tensor, edge_weight: torch.Tensor,
              dst_ids: torch.Tensor, self_feat: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # Vertex-cut partition: this rank holds a set of edges. dst_ids [m] are the (unique) global
    # ids of the destination nodes its edges touch; row i of nbr_idx/edge_weight [m, K] lists the
    # local source rows (into src_feat [n_src, F]) of the edges into dst_ids[i]. A node's edges are
    # spread over several partitions, so each holds only a partial aggregate; the owner
    # (rank g // nodes_per_rank) sums the partials plus the self-loop term of its own nodes
    # (self_feat [nodes_per_rank, F]) and returns the total to every replica.
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    m, k = nbr_idx.shape
    nodes_per_rank, feat = self_feat.shape
    # Local aggregation, fp32 accumulation in a fixed order over the K slots.
    acc = torch.zeros((m, feat), dtype=torch.float32, device=src_feat.device)
    for j in range(k):
        acc += src_feat[nbr_idx[:, j]].float() * edge_weight[:, j:j + 1].float()
    partial = acc.to(src_feat.dtype)
    # Leader round: route each partial to the owner of its node.
    owner = dst_ids // nodes_per_rank
    order = torch.argsort(owner, stable=True)
    send_counts = torch.bincount(owner, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    ss, rs = send_counts.tolist(), recv_counts.tolist()
    n_recv = sum(rs)
    recv_ids = torch.empty(n_recv, dtype=dst_ids.dtype, device=dst_ids.device)
    dist.all_to_all_single(recv_ids, dst_ids[order], rs, ss, group=group)
    recv_part = torch.empty((n_recv, feat), dtype=partial.dtype, device=partial.device)
    dist.all_to_all_single(recv_part, partial[order], rs, ss, group=group)
    # The owner sums the partials. Each source rank sends a node at most once, so scatter the
    # partials into a [source rank, node, F] buffer (unique indices) and reduce over the
    # source axis in rank order: deterministic, no atomics.
    src_rank = torch.repeat_interleave(torch.arange(world, device=dst_ids.device),
                                       recv_counts)
    local = recv_ids - rank * nodes_per_rank
    buf = torch.zeros((world, nodes_per_rank, feat), dtype=torch.float32, device=partial.device)
    buf[src_rank, local] = recv_part.float()
    owned = (buf.sum(0) + self_feat.float()).to(partial.dtype)
    # Replica round: send the totals back to every partition that holds a replica.
    reply = owned[local]
    back = torch.empty((m, feat), dtype=partial.dtype, device=partial.device)
    dist.all_to_all_single(back, reply, ss, rs, group=group)
    replica = torch.empty_like(back)
    replica[order] = back
    return owned, replica


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n_local, world = case["nodes_per_rank"], case.world_size
    n_total = n_local * world
    m, n_src, k = case["dst_per_rank"], case["src_per_rank"], case["fanin"]
    perm = case.randperm(n_total, stream="dst")
    return {
        "src_feat": case.randn(n_src, case["feat"], stream="src_feat"),
        "nbr_idx": case.randint(0, n_src, m, k, stream="nbr"),
        "edge_weight": case.rand(m, k, stream="edge_weight", high=1.0 / k),
        "dst_ids": perm[:m],
        "self_feat": case.randn(n_local, case["feat"], stream="self_feat"),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    m, k, feat, n_local = s["dst_per_rank"], s["fanin"], s["feat"], s["nodes_per_rank"]
    row = feat * s.itemsize
    remote = (n - 1) / n
    # Partials (+ ids) out to owners, totals back: each leg ~m rows, all but 1/n remote.
    link = remote * m * (row + 8) + remote * m * row
    hbm = m * k * (row + s.itemsize + 8) + 4 * m * row + 2 * n_local * row
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=2 * m * k * feat + m * feat)


PROBLEM = Problem(
    id=1104,
    slug="distgnn-partial-aggregation",
    title="DistGNN split-node aggregation (partials to owner, totals back)",
    description=(
        "DistGNN trains full-batch GNNs on a vertex-cut partition: edges are divided among "
        "ranks, so a high-degree node is replicated on every partition that holds some of its "
        "edges, and each replica can only aggregate the messages of its local edges. After the "
        "local aggregation the partial sums of split nodes are sent to the node's owner "
        "(all-to-all with counts exchanged first), the owner adds them up, and the completed "
        "aggregate travels back to every replica so the next layer sees the full neighbourhood. "
        "This happens in every layer, forward and backward, and the traffic grows with the "
        "replication factor; a fast kernel accumulates partials directly into the owner's "
        "buffer over NVLink in a fixed order and pushes the totals back without staging."
    ),
    categories=("graph",),
    source=Source("DGL", "python/dgl/distgnn/drpa_sym.py: DRPACore.forward",
                  "https://github.com/dmlc/dgl"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"nodes_per_rank": 32, "dst_per_rank": 40, "src_per_rank": 64,
                     "fanin": 4, "feat": 16},
           "default": {"nodes_per_rank": 1 << 18, "dst_per_rank": 1 << 18,
                       "src_per_rank": 1 << 18, "fanin": 8, "feat": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
)
