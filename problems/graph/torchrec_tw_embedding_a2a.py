"""TorchRec table-wise sharded EmbeddingBagCollection: KJT all-to-all, lookup, pooled all-to-all."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(lengths: torch.Tensor, values: torch.Tensor, weights: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # KeyedJaggedTensor of this rank's local batch: lengths [T, B] (bags per table, key-major),
    # values [nnz] row ids in the same order. Table t lives whole on rank t // tables_per_rank;
    # weights [tables_per_rank, rows, D] are this rank's tables.
    world = dist.get_world_size(group)
    n_tables, batch = lengths.shape
    t_local, rows, dim = weights.shape
    # KJTAllToAll: per-destination value counts first, then lengths (even) and values (uneven).
    send_counts = lengths.reshape(world, t_local * batch).sum(1)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    ss, rs = send_counts.tolist(), recv_counts.tolist()
    recv_lengths = torch.empty(world * t_local * batch, dtype=lengths.dtype, device=lengths.device)
    dist.all_to_all_single(recv_lengths, lengths.reshape(-1), group=group)
    recv_values = torch.empty(sum(rs), dtype=values.dtype, device=values.device)
    dist.all_to_all_single(recv_values, values, rs, ss, group=group)
    # Lookup: bags arrive ordered (source rank, local table, sample); pool by sum.
    bag_table = torch.arange(t_local, device=values.device).repeat_interleave(batch).repeat(world)
    value_table = torch.repeat_interleave(bag_table, recv_lengths)
    offsets = torch.zeros(world * t_local * batch, dtype=torch.int64, device=values.device)
    offsets[1:] = torch.cumsum(recv_lengths, 0)[:-1]
    pooled = F.embedding_bag(recv_values + value_table * rows, weights.reshape(t_local * rows, dim),
                             offsets, mode="sum")
    # PooledEmbeddingsAllToAll: each source rank gets its samples back for the tables here.
    back = torch.empty_like(pooled)
    dist.all_to_all_single(back, pooled, group=group)
    # back: [owner rank, local table, sample, D] = [table, sample, D] -> [sample, table * D].
    return back.reshape(n_tables, batch, dim).permute(1, 0, 2).reshape(batch, n_tables * dim)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tables = case["tables_per_rank"] * case.world_size
    batch, nnz = case["batch_per_rank"], case["nnz_per_rank"]
    n_bags = tables * batch
    # Bag lengths from sorted random cut points: a fixed total nnz (so shapes are
    # value-independent) split unevenly over bags and tables.
    cuts = case.randint(0, nnz + 1, n_bags - 1, stream="cuts")
    if case.is_meta:
        lengths = torch.empty((tables, batch), dtype=torch.int64, device="meta")
    else:
        bounds = torch.cat([cuts.new_zeros(1), torch.sort(cuts).values, cuts.new_full((1,), nnz)])
        lengths = torch.diff(bounds).reshape(tables, batch)
    return {
        "lengths": lengths,
        "values": case.randint(0, case["rows"], nnz, stream="values"),
        "weights": case.randn(case["tables_per_rank"], case["rows"], case["dim"], stream="weights",
                              std=0.05),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    tables = s["tables_per_rank"] * n
    batch, nnz, dim = s["batch_per_rank"], s["nnz_per_rank"], s["dim"]
    ids = nnz * 8 + tables * batch * 8
    pooled = batch * tables * dim * s.itemsize
    link = traffic.all_to_all(ids, n) + traffic.all_to_all(pooled, n)
    # Read ids twice (send, lookup), one embedding row per id, write pooled twice.
    hbm = 2 * ids + nnz * dim * s.itemsize + 2 * pooled
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=nnz * dim)


PROBLEM = Problem(
    id=1103,
    slug="torchrec-tw-embedding-all-to-all",
    title="TorchRec table-wise sharded embedding bags (KJT + pooled all-to-all)",
    description=(
        "A recommendation model's EmbeddingBagCollection shards whole tables across ranks. Each "
        "rank's batch arrives as a KeyedJaggedTensor (per-table bag lengths and row ids); "
        "KJTAllToAll first exchanges the per-destination value counts, then routes each table's "
        "lengths and ids to the rank that owns it. The owner sums the embedding rows of every bag "
        "for the whole global batch, and PooledEmbeddingsAllToAll sends each rank its own "
        "samples' pooled vectors for all tables. The two all-to-alls bracket every forward step "
        "of DLRM-style training and are often its largest communication; a fast kernel avoids "
        "the count round trip and the host sync, and writes pooled rows straight into the "
        "requesters' output."
    ),
    categories=("graph",),
    source=Source("TorchRec",
                  "torchrec/distributed/dist_data.py: KJTAllToAll / PooledEmbeddingsAllToAll",
                  "https://github.com/pytorch/torchrec"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tables_per_rank": 2, "batch_per_rank": 8, "nnz_per_rank": 96,
                     "rows": 32, "dim": 16},
           "default": {"tables_per_rank": 4, "batch_per_rank": 4096, "nnz_per_rank": 1 << 21,
                       "rows": 100_000, "dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
)
