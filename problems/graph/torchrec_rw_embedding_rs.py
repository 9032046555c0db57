"""TorchRec row-wise sharded embedding bags: bucketize ids, all-to-all, partial pooling, reduce-scatter."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(lengths: torch.Tensor, values: torch.Tensor, weights: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # KeyedJaggedTensor of the local batch: lengths [T, B], values [nnz] global row ids of each
    # table (key-major). Every table is split by rows: rank r holds rows
    # [r * rows_per_rank, (r + 1) * rows_per_rank) of each table, weights [T, rows_per_rank, D].
    world = dist.get_world_size(group)
    n_tables, batch = lengths.shape
    _, rows_per_rank, dim = weights.shape
    n_bags = n_tables * batch
    # bucketize_kjt_before_all2all: bucket = owner of the row, ids made shard-local, and
    # per-bucket bag lengths; values keep their bag order inside each bucket.
    bag = torch.repeat_interleave(torch.arange(n_bags, device=values.device), lengths.reshape(-1))
    bucket = values // rows_per_rank
    order = torch.argsort(bucket, stable=True)
    send_values = (values % rows_per_rank)[order]
    bucket_lengths = torch.bincount(bucket * n_bags + bag, minlength=world * n_bags)
    send_counts = torch.bincount(bucket, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    ss, rs = send_counts.tolist(), recv_counts.tolist()
    recv_lengths = torch.empty_like(bucket_lengths)
    dist.all_to_all_single(recv_lengths, bucket_lengths, group=group)
    recv_values = torch.empty(sum(rs), dtype=values.dtype, device=values.device)
    dist.all_to_all_single(recv_values, send_values, rs, ss, group=group)
    # Partial pooling over the rows held here, for every rank's bags: order (source, table, bag).
    bag_table = torch.arange(n_tables, device=values.device).repeat_interleave(batch).repeat(world)
    value_table = torch.repeat_interleave(bag_table, recv_lengths)
    offsets = torch.zeros(world * n_bags, dtype=torch.int64, device=values.device)
    offsets[1:] = torch.cumsum(recv_lengths, 0)[:-1]
    partial = F.embedding_bag(recv_values + value_table * rows_per_rank,
                              weights.reshape(n_tables * rows_per_rank, dim), offsets, mode="sum")
    # PooledEmbeddingsReduceScatter: sum the partials over shards, each rank keeps its batch.
    partial = partial.reshape(world, n_tables, batch, dim).permute(0, 2, 1, 3).contiguous()
    out = torch.empty((batch, n_tables * dim), dtype=weights.dtype, device=weights.device)
    dist.reduce_scatter_tensor(out, partial.reshape(world * batch, n_tables * dim),
                               op=dist.ReduceOp.SUM, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tables, batch, nnz = case["tables"], case["batch_per_rank"], case["nnz_per_rank"]
    n_bags = tables * batch
    rows_per_rank = case["rows_per_rank"]
    cuts = case.randint(0, nnz + 1, n_bags - 1, stream="cuts")
    if case.is_meta:
        lengths = torch.empty((tables, batch), dtype=torch.int64, device="meta")
    else:
        bounds = torch.cat([cuts.new_zeros(1), torch.sort(cuts).values, cuts.new_full((1,), nnz)])
        lengths = torch.diff(bounds).reshape(tables, batch)
    return {
        "lengths": lengths,
        "values": case.randint(0, rows_per_rank * case.world_size, nnz, stream="values"),
        "weights": case.randn(tables, rows_per_rank, case["dim"], stream="weights", std=0.05),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    tables, batch, nnz, dim = s["tables"], s["batch_per_rank"], s["nnz_per_rank"], s["dim"]
    ids = nnz * 8 + n * tables * batch * 8
    pooled_in = n * batch * tables * dim * s.itemsize  # reduce-scatter input per rank
    link = traffic.all_to_all(ids, n) + traffic.reduce_scatter(pooled_in, n)
    hbm = 2 * ids + nnz * dim * s.itemsize + 2 * pooled_in
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=nnz * dim + pooled_in / s.itemsize)


PROBLEM = Problem(
    id=1107,
    slug="torchrec-rw-embedding-reduce-scatter",
    title="TorchRec row-wise sharded embedding bags (bucketized KJT all-to-all + reduce-scatter)",
    description=(
        "Tables too large for one GPU are sharded by rows in TorchRec. Each rank bucketizes its "
        "KeyedJaggedTensor by the row range that owns every id (keeping bag structure as "
        "per-bucket lengths), exchanges counts, lengths and ids with all-to-alls, and every "
        "shard pools the rows it holds for all ranks' bags. A bag's rows are spread over "
        "shards, so the pooled vectors are only partial: PooledEmbeddingsReduceScatter sums "
        "them across shards and leaves each rank its own batch. The reduce-scatter moves "
        "world x batch x tables x dim values per step; a fast kernel skips bags a shard never "
        "touched and accumulates partials directly in the owning rank's output."
    ),
    categories=("graph",),
    source=Source("TorchRec",
                  "torchrec/distributed/sharding/rw_sharding.py: RwSparseFeaturesDist / "
                  "RwPooledEmbeddingDist (PooledEmbeddingsReduceScatter)",
                  "https://github.com/pytorch/torchrec"),
    collectives=("all_to_all", "reduce_scatter"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tables": 3, "batch_per_rank": 8, "nnz_per_rank": 96, "rows_per_rank": 16,
                     "dim": 16},
           "default": {"tables": 8, "batch_per_rank": 4096, "nnz_per_rank": 1 << 20,
                       "rows_per_rank": 65536, "dim": 128}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
)
