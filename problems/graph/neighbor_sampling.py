"""Distributed neighbour sampling: seeds sent to the partition that owns their adjacency."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(adj: torch.Tensor, degree: torch.Tensor, edge_weight: torch.Tensor,
              seeds: torch.Tensor, uniforms: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # adj: [nodes_per_rank, max_degree] global neighbour ids of the nodes this rank owns
    # (row i holds degree[i] valid entries, the rest is padding); edge_weight alongside.
    # seeds: [n_seeds] global ids to expand; uniforms: [n_seeds, fanout] float32 random numbers
    # in [0, 1) that make the sampling with replacement deterministic: they travel with the seed.
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    n_local = adj.shape[0]
    fanout = uniforms.shape[1]
    owner = seeds // n_local
    order = torch.argsort(owner, stable=True)
    send_counts = torch.bincount(owner, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    ss, rs = send_counts.tolist(), recv_counts.tolist()
    n_recv = sum(rs)
    # Request: seed ids and their random numbers.
    req_ids = torch.empty(n_recv, dtype=seeds.dtype, device=seeds.device)
    dist.all_to_all_single(req_ids, seeds[order], rs, ss, group=group)
    req_u = torch.empty((n_recv, fanout), dtype=uniforms.dtype, device=uniforms.device)
    dist.all_to_all_single(req_u, uniforms[order], rs, ss, group=group)
    # Owner samples: slot = floor(u * degree), clamped into the valid range, computed exactly:
    # a float32 u times a degree is exact in float64. In float32 a product just below an integer
    # can round up to it (u = 0.96774190664, degree 31: 30.0 for 29.99999...), and the edge
    # drawn, and its weight, would hang on rounding (the float64 exact answer drew the other).
    local = req_ids - rank * n_local
    deg = degree[local].unsqueeze(1)
    slot = torch.minimum((req_u.double() * deg.double()).to(torch.int64), deg - 1)
    nbrs = torch.gather(adj[local], 1, slot)
    wts = torch.gather(edge_weight[local], 1, slot)
    # Response back along the reversed splits.
    got_nbrs = torch.empty((seeds.shape[0], fanout), dtype=nbrs.dtype, device=nbrs.device)
    dist.all_to_all_single(got_nbrs, nbrs, ss, rs, group=group)
    got_wts = torch.empty((seeds.shape[0], fanout), dtype=wts.dtype, device=wts.device)
    dist.all_to_all_single(got_wts, wts, ss, rs, group=group)
    out_nbrs = torch.empty_like(got_nbrs)
    out_nbrs[order] = got_nbrs
    out_wts = torch.empty_like(got_wts)
    out_wts[order] = got_wts
    return out_nbrs, out_wts


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n_local, max_deg = case["nodes_per_rank"], case["max_degree"]
    n_total = n_local * case.world_size
    return {
        "adj": case.randint(0, n_total, n_local, max_deg, stream="adj"),
        "degree": case.randint(1, max_deg + 1, n_local, stream="degree"),
        "edge_weight": case.rand(n_local, max_deg, stream="edge_weight"),
        "seeds": case.randint(0, n_total, case["seeds"], stream="seeds"),
        "uniforms": case.rand(case["seeds"], case["fanout"], stream="uniforms", dtype=torch.float32),
    }


def roofline(s: Setting) -> Traffic:
    n_seeds, fanout = s["seeds"], s["fanout"]
    remote = (s.world_size - 1) / s.world_size
    request = n_seeds * (8 + 4 * fanout)  # id + float32 uniforms per seed
    response = n_seeds * fanout * (8 + s.itemsize)  # neighbour id + edge weight per sample
    link = remote * max(request, response)
    # Requests and responses read/written once; the owner reads degree and the sampled entries.
    hbm = 2 * (request + response) + n_seeds * 8
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=n_seeds * fanout)


PROBLEM = Problem(
    id=1102,
    slug="gnn-distributed-neighbor-sampling",
    title="Distributed neighbour sampling (request/response all-to-all)",
    description=(
        "Mini-batch GNN training on a partitioned graph expands every seed node by sampling a "
        "fixed fanout of its neighbours, but the adjacency of a seed lives on the partition that "
        "owns it. The sampler groups seeds by owner, ships them (with the random numbers that "
        "drive the draw, which makes the sample reproducible) in an uneven all-to-all, the owner "
        "samples with replacement from its padded adjacency (slot floor(u * degree), computed "
        "exactly: in float64, where a float32 u times a degree is exact), and the neighbour ids "
        "and edge "
        "weights travel back. This runs once per layer per mini-batch before any feature fetch, "
        "so its latency bounds the input pipeline; the messages are small and numerous, and a "
        "fast kernel serves requests straight out of peers' adjacency over NVLink instead of "
        "four collectives and two host syncs."
    ),
    categories=("graph",),
    source=Source("DGL", "python/dgl/distributed/graph_services.py: sample_neighbors",
                  "https://github.com/dmlc/dgl"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"nodes_per_rank": 64, "max_degree": 8, "seeds": 32, "fanout": 4},
           "default": {"nodes_per_rank": 1 << 20, "max_degree": 32, "seeds": 1 << 17,
                       "fanout": 16}},
    tolerances=tolerances(float32=(0.0, 0.0), bfloat16=(0.0, 0.0)),
    dtypes=(torch.float32, torch.bfloat16),
    traffic=roofline,
    tags=("latency",),
)
