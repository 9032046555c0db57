"""TorchRec table-wise sharded pooled embedding lookup: id all-to-all, local bags, embedding all-to-all."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(ids: torch.Tensor, tables: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # ids: (local batch, features, pooling) for every feature; feature f is table f, owned by
    # rank f // tables_per_rank. tables: (tables_per_rank, rows, dim), this rank's tables.
    world = dist.get_world_size(group)
    b, f, pool = ids.shape
    t, dim = tables.shape[0], tables.shape[2]
    # Input dist: every rank sends the ids of rank r's tables to rank r.
    send = ids.view(b, world, t, pool).transpose(0, 1).contiguous()  # (dest, b, t, pool)
    recv = torch.empty_like(send)                                     # (src, b, t, pool)
    dist.all_to_all_single(recv, send, group=group)
    # Local sum-pooled lookup for the whole global batch on this rank's tables.
    ids_t = recv.view(world * b, t, pool).transpose(0, 1)            # (t, global batch, pool)
    rows = tables.shape[1]
    flat = (ids_t + (torch.arange(t, device=ids.device) * rows).view(t, 1, 1)).reshape(-1)
    emb = tables.reshape(t * rows, dim)[flat].view(t, world * b, pool, dim)
    pooled = emb.float().sum(dim=2).to(tables.dtype)                  # (t, global batch, dim)
    # Output dist: send each source rank's samples back.
    out_send = pooled.view(t, world, b, dim).permute(1, 2, 0, 3).contiguous()  # (src, b, t, dim)
    out_recv = torch.empty_like(out_send)                                      # (owner, b, t, dim)
    dist.all_to_all_single(out_recv, out_send, group=group)
    # KeyedTensor layout: (local batch, features * dim) in feature order.
    return out_recv.permute(1, 0, 2, 3).reshape(b, f * dim)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    world = case.world_size
    t = case["tables"] // world
    b = case["batch"] // world
    return {
        "ids": case.randint(0, case["rows"], b, case["tables"], case["pooling"], stream="ids"),
        "tables": case.randn(t, case["rows"], case["dim"], stream="tables", std=0.05),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    b, f, pool, dim = s["batch"] // n, s["tables"], s["pooling"], s["dim"]
    id_bytes = b * f * pool * 8
    out_bytes = b * f * dim * s.itemsize
    link = traffic.all_to_all(id_bytes, n) + traffic.all_to_all(out_bytes, n)
    # Gathered rows: global batch x own tables x pooling rows of dim.
    rows_read = n * b * (f // n) * pool * dim * s.itemsize
    return Traffic(link_bytes=link, hbm_bytes=id_bytes + rows_read + out_bytes,
                   flops=n * b * (f // n) * pool * dim)


PROBLEM = Problem(
    id=1305,
    slug="torchrec-tw-pooled-embedding",
    title="TorchRec table-wise sharded pooled embedding lookup",
    description=(
        "In a DLRM-style recommender trained with TorchRec, embedding tables are too large to "
        "replicate, so with table-wise sharding each rank owns whole tables. The sparse "
        "features of the local batch are sent to the table owners with an all-to-all (input "
        "dist), each owner sum-pools the looked-up rows for the global batch on its tables, "
        "and a second all-to-all returns the pooled embeddings to the ranks that own the "
        "samples (output dist), laid out as (batch, features x dim). Both exchanges are on the "
        "critical path of every step and the lookup is a random gather from HBM; a fast "
        "implementation fuses the pooling with the outgoing transfer and writes results "
        "directly into the owners' output buffers. Fixed pooling factor (every bag has the same "
        "number of ids) keeps the shapes static."
    ),
    categories=("other",),
    source=Source("TorchRec", "torchrec/distributed/sharding/tw_sharding.py: TwPooledEmbeddingDist",
                  "https://github.com/pytorch/torchrec"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 16, "tables": 8, "rows": 50, "pooling": 3, "dim": 8},
           "default": {"batch": 16384, "tables": 64, "rows": 100000, "pooling": 16, "dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
)
