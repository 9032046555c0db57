"""DistDGL-style pull of remote (halo) node features from their owner partitions."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(features: torch.Tensor, halo_ids: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # features: [nodes_per_rank, F], the feature rows this rank owns. Node g is owned by rank
    # g // nodes_per_rank (DistDGL relabels nodes so that each partition is a contiguous range).
    # halo_ids: [n_halo] global ids of remote neighbours whose features this rank needs.
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    n_local, feat = features.shape
    owner = halo_ids // n_local
    order = torch.argsort(owner, stable=True)
    send_ids = halo_ids[order]
    send_counts = torch.bincount(owner, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    send_splits = send_counts.tolist()
    recv_splits = recv_counts.tolist()
    # Requests out: the ids each owner must serve.
    recv_ids = torch.empty(sum(recv_splits), dtype=halo_ids.dtype, device=halo_ids.device)
    dist.all_to_all_single(recv_ids, send_ids, recv_splits, send_splits, group=group)
    # Serve them from the local shard, answers back along the reversed splits.
    served = features.index_select(0, recv_ids - rank * n_local)
    fetched = torch.empty((halo_ids.shape[0], feat), dtype=features.dtype, device=features.device)
    dist.all_to_all_single(fetched, served, send_splits, recv_splits, group=group)
    out = torch.empty_like(fetched)
    out[order] = fetched
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n_local, world = case["nodes_per_rank"], case.world_size
    n_total = n_local * world
    # Remote ids only: offset past this rank's own range, wrapping around the global id space.
    offset = case.randint(0, n_total - n_local, case["halo"], stream="halo")
    halo_ids = (offset + (case.rank + 1) * n_local) % n_total
    return {
        "features": case.randn(n_local, case["feat"], stream="features"),
        "halo_ids": halo_ids,
    }


def roofline(s: Setting) -> Traffic:
    n_halo, feat = s["halo"], s["feat"]
    row = feat * s.itemsize
    # Every halo row arrives over the links (all requests are remote); ids go out. In
    # expectation a rank serves as many rows as it requests, so send ~ receive.
    link = n_halo * (row + 8)
    # Read the ids, read the served rows, write the fetched rows.
    hbm = n_halo * 8 * 2 + n_halo * row * 2
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=1101,
    slug="gnn-halo-feature-fetch",
    title="GNN halo feature fetch (DistDGL KVStore pull)",
    description=(
        "In DistDGL each trainer owns a contiguous range of node ids and their feature rows; a "
        "mini-batch touches neighbour nodes owned by other partitions, so before the GNN layers "
        "run the trainer pulls those halo features: it groups the requested ids by owner, sends "
        "the ids, and every owner answers with the rows gathered from its shard. Both legs are "
        "uneven all-to-alls whose sizes are only known after a count exchange. The pull sits "
        "directly in front of the forward pass and moves tens to hundreds of MiB per step; a "
        "fast kernel fuses the bucketing, the id exchange, the gather on the owner and the reply "
        "into one pass that reads peers' shards directly over NVLink, with no host sync on the counts."
    ),
    categories=("graph",),
    source=Source("DGL", "python/dgl/distributed/kvstore.py: KVClient.pull",
                  "https://github.com/dmlc/dgl"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"nodes_per_rank": 64, "feat": 16, "halo": 48},
           "default": {"nodes_per_rank": 1 << 20, "feat": 256, "halo": 1 << 18}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    pkb_ids=(10,),
)
