"""DINOv2 k-NN evaluation: queries broadcast rank by rank, local top-k, gather, global top-k, votes."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

K, TEMPERATURE, NUM_CLASSES = 20, 0.07, 1000
QUANT = 256  # features are multiples of 1/256 (see make_inputs)


def _keys(sims: torch.Tensor, first_index: int, n_total: int) -> torch.Tensor:
    # Unique int64 ranking key: exact similarity first, then the lower global train index.
    # Features are multiples of 1/256, so sims are multiples of 2^-16, exact in fp32.
    s = torch.round(sims * float(QUANT * QUANT)).to(torch.int64)
    idx = first_index + torch.arange(sims.shape[1], device=sims.device, dtype=torch.int64)
    return s * n_total + (n_total - 1 - idx)


def reference(queries: torch.Tensor, train_features: torch.Tensor, train_labels: torch.Tensor,
              *, group: dist.ProcessGroup):
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    n_local = train_features.shape[0]
    n_total = n_local * world
    train_t = train_features.float().t()
    result = None
    for src in range(world):
        # Send the queries of `src` to every rank.
        q = queries.clone()
        dist.broadcast(q, src=dist.get_global_rank(group, src), group=group)
        keys = _keys(q.float() @ train_t, rank * n_local, n_total)
        top_keys, idx = keys.topk(K, dim=1, largest=True, sorted=True)
        labels = train_labels[idx]
        # Collect every rank's candidates on `src`, then a second top-k over world * K.
        is_src = rank == src
        key_parts = [torch.empty_like(top_keys) for _ in range(world)] if is_src else None
        label_parts = [torch.empty_like(labels) for _ in range(world)] if is_src else None
        dst = dist.get_global_rank(group, src)
        dist.gather(top_keys, gather_list=key_parts, dst=dst, group=group)
        dist.gather(labels, gather_list=label_parts, dst=dst, group=group)
        if is_src:
            all_keys, all_labels = torch.cat(key_parts, dim=1), torch.cat(label_parts, dim=1)
            best, pos = all_keys.topk(K, dim=1, largest=True, sorted=True)
            result = (best, torch.gather(all_labels, 1, pos))
    best, neighbor_labels = result
    sims = torch.div(best, n_total, rounding_mode="floor").double().div(QUANT * QUANT).float()
    weights = torch.softmax(sims / TEMPERATURE, dim=1)
    probs = torch.zeros(sims.shape[0], NUM_CLASSES, dtype=torch.float32, device=sims.device)
    probs.scatter_add_(1, neighbor_labels, weights)
    return probs, sims, neighbor_labels


def _features(case: Case, rows: int, stream: str) -> torch.Tensor:
    # Quantised features (multiples of 1/256 in [-1/8, 1/8]): dot products are exact in fp32
    # and in bf16-input/fp32-accumulate GEMMs, so every correct kernel ranks neighbours alike.
    q = case.randint(-32, 33, rows, case["dim"], stream=stream)
    return (q.to(torch.float32) / QUANT).to(case.dtype)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n_local = case["train"] // case.world_size
    return {
        "queries": _features(case, case["queries"] // case.world_size, "q"),
        "train_features": _features(case, n_local, "train"),
        "train_labels": case.randint(0, NUM_CLASSES, n_local, stream="labels"),
    }


def roofline(s: Setting) -> Traffic:
    n, d = s.world_size, s["dim"]
    qg, nl = s["queries"], s["train"] // n
    q_bytes = qg * d * s.itemsize
    # All queries reach every rank; each rank's candidates (8-byte key + 8-byte label) reach
    # their query's owner.
    link = traffic.all_gather(q_bytes, n) + (n - 1) * (qg // n) * K * 16
    hbm = q_bytes + nl * d * s.itemsize + 8 * nl + (qg // n) * (NUM_CLASSES + K) * 8
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=2 * qg * nl * d)


PROBLEM = Problem(
    id=1304,
    slug="dinov2-knn-eval",
    title="Distributed k-NN classification (DINOv2 evaluation)",
    description=(
        "DINOv2's k-NN evaluation shards the train-set features across ranks. For each rank in "
        "turn, its test features are broadcast to all ranks, each rank computes similarities "
        "against its train shard and keeps its local top-k with labels, the candidates are "
        "gathered on the source rank, which takes the global top-k and turns it into class "
        "probabilities by a temperature-softmax vote. The world sequential broadcast/gather "
        "rounds serialise the ranks; a fast version exchanges all queries at once, fuses the "
        "similarity GEMM with the top-k selection (never writing the similarity matrix) and "
        "sends the candidates straight to their owners. To make the neighbour sets exact, "
        "features are quantised to multiples of 1/256 (similarities exact in fp32) and ties "
        "go to the lower global train index, encoded as key = sim * 2^16 * N + (N - 1 - index). "
        "Outputs: class probabilities, top-k similarities and neighbour labels."
    ),
    categories=("other",),
    source=Source("DINOv2", "dinov2/eval/knn.py: KnnModule.compute_neighbors",
                  "https://github.com/facebookresearch/dinov2"),
    collectives=("broadcast", "gather"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"queries": 16, "train": 256, "dim": 16},
           "default": {"queries": 512, "train": 2**19, "dim": 384}},
    tolerances=tolerances(bfloat16=(1e-5, 1e-4), float32=(1e-5, 1e-4)),
    traffic=roofline,
    tags=("inference",),
    pkb_ids=(79,),
)
