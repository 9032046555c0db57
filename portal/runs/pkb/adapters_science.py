"""ParallelKernelBench adapters: graphs, spatial and scientific codes, vision (halo exchanges,
GraphBolt and GraphStorm, the distributed rFFT, DeePMD, DINOv2, iBOT, SAM 3).

See adapter.py for what an adapter is; adapters.py gathers every family's. Constants that a body
repeats (K, the no-object logit, ...) are our problems' own, named after them; the wrapped module
cannot import the problem."""

from __future__ import annotations

from .adapter import Adapter

# Both GraphBolt exchanges: PKB's count lists and row blocks start at this rank's own block and
# wrap around (GraphBolt's all_to_all shifts them so); ours are in rank order.
_GRAPHBOLT_NOTE = ("PKB orders the per-peer counts and row blocks from this rank on (rank, "
                   "rank + 1, ..., rank - 1), as GraphBolt's all_to_all does; ours are in rank "
                   "order. Counts are passed as lists, the group as PKB's `group`")
_ROTATED_COUNTS = ("    rank = dist.get_rank(group)\n"
                   "    sent, received = counts_sent.tolist(), counts_received.tolist()\n"
                   "    sent_from_me = sent[rank:] + sent[:rank]\n"
                   "    received_from_me = received[rank:] + received[:rank]\n")

_GRAPHS: tuple[Adapter, ...] = (
    Adapter(10, "gnn-halo-feature-fetch",
            "PKB returns the fetched rows grouped by owner rank (stable within an owner); ours "
            "returns them in the order of the requested ids",
            "a stable sort of the ids by owner and a scatter of the rows back into request order",
            "def solution(features, halo_ids, *, group):\n"
            "    fetched = _pkb_solution(halo_ids, features)\n"
            "    order = torch.argsort(halo_ids // features.shape[0], stable=True)\n"
            "    out = torch.empty_like(fetched)\n"
            "    out[order] = fetched\n"
            "    return out\n"),
    Adapter(65, "graphbolt-feature-exchange", _GRAPHBOLT_NOTE,
            "the counts as lists (a host sync, as the reference makes), a rotated copy of the "
            "ids and of the received rows",
            "def solution(features, seed_inverse_ids, counts_sent, counts_received, *, group):\n"
            + _ROTATED_COUNTS +
            "    ids = torch.roll(seed_inverse_ids, -sum(received[:rank]))\n"
            "    out = _pkb_solution(features, ids, sent_from_me, received_from_me, group)\n"
            "    return torch.roll(out, sum(sent[:rank]), dims=0)\n"),
    Adapter(66, "graphbolt-feature-exchange-backward", _GRAPHBOLT_NOTE,
            "the counts as lists (a host sync, as the reference makes), a rotated copy of the "
            "ids and of the gradient rows",
            "def solution(grad_output, seed_inverse_ids, counts_sent, counts_received, seed_size,"
            " *, group):\n"
            + _ROTATED_COUNTS +
            "    grad = torch.roll(grad_output, -sum(sent[:rank]), dims=0)\n"
            "    ids = torch.roll(seed_inverse_ids, -sum(received[:rank]))\n"
            "    return _pkb_solution(grad, ids, seed_size, sent_from_me, received_from_me, group)\n"),
    Adapter(69, "graphstorm-negative-ranking",
            "PKB ranks by sigmoid(score) sorted in the input dtype, where distinct bfloat16 "
            "scores round to one value, and leaves ties to an unstable sort; ours compares the "
            "scores themselves and ranks a positive first among equal negatives. For bfloat16 "
            "the adapter hands PKB float32 scores, each positive raised by less than a bfloat16 "
            "step (|x| / 512): that keeps its order against every other bfloat16 value and puts "
            "it above equal ones",
            "for bfloat16, a float32 copy of both score tensors (PKB's exchange then moves twice "
            "the bytes); none for float32",
            "def solution(pos_scores, neg_scores, *, group):\n"
            "    if pos_scores.dtype == torch.bfloat16:\n"
            "        pos = pos_scores.float()\n"
            "        pos_scores = pos + pos.abs() * 2.0 ** -9\n"
            "        neg_scores = neg_scores.float()\n"
            "    return _pkb_solution(pos_scores, neg_scores, group)\n"),
)

_SPATIAL: tuple[Adapter, ...] = (
    Adapter(59, "physicsnemo-distributed-rfft2",
            "PKB transforms (B, H, W/p) over dims (1, 2) and returns complex64; ours is "
            "(B, C, H, W/p) and returns the real/imaginary pairs; s and dim are PKB's arguments",
            "none (views)",
            "def solution(x, *, group):\n"
            "    b, c, h, w_local = x.shape\n"
            "    world = dist.get_world_size(group)\n"
            "    w = w_local * world\n"
            "    out = _pkb_solution(x.reshape(b * c, h, w_local), (h, w), (1, 2), 'ortho', group)\n"
            "    return torch.view_as_real(out).reshape(b, c, h // world, w // 2 + 1, 2)\n"),
    # KALMAN_NUE: problems/spatial/deepmd_kalman_optimizer.py.
    Adapter(63, "deepmd-kalman-optimizer-step",
            "PKB takes lists of (b, 1) blocks for H and the weights, a list of (b, b) covariances, "
            "error (1, 1) and lambda as a float, and returns lists and a 0-d lambda; ours stacks "
            "the blocks ([nb, b], [nb, b, b]) and keeps lambda a [1] tensor. PKB's forgetting "
            "factor is passed as ours, 0.9987",
            "lambda read to the host (a sync) and a stacked copy of the gathered weights and of "
            "the new covariances",
            "def solution(H, P, weights, error, kalman_lambda, *, group):\n"
            "    nb, b = H.shape\n"
            "    new_weights, new_P, next_lambda = _pkb_solution(\n"
            "        list(H.unsqueeze(-1).unbind(0)), error.reshape(1, 1),\n"
            "        list(weights.unsqueeze(-1).unbind(0)), list(P.unbind(0)),\n"
            "        float(kalman_lambda), 0.9987)\n"
            "    return (torch.stack(new_weights).reshape(-1, b), torch.stack(new_P),\n"
            "            next_lambda.reshape(1))\n"),
    Adapter(87, "halo-exchange-conv2d",
            "PKB takes stride and padding; ours fixes stride 1 and pads by half the kernel",
            "none",
            "def solution(x, weight, bias, *, group):\n"
            "    return _pkb_solution(x, weight, bias, 1, weight.shape[-1] // 2, group)\n"),
)

_VISION: tuple[Adapter, ...] = (
    # K = 20, temperature 0.07, 1000 classes, features in steps of 1/256:
    # problems/other/dinov2_knn.py.
    Adapter(79, "dinov2-knn-eval",
            "PKB returns the top max_k similarities (in the input dtype, ties in top-k's order) "
            "and labels of each query; ours also votes them into class probabilities and breaks "
            "ties by the lower global train index. The adapter hands PKB float32 features (its "
            "similarities are then exact), the train shard transposed, labels coded as global "
            "index * 1000 + label, and max_k = 2K (at most the shard): a tie at the K-th "
            "similarity then cannot leave out a lower-index neighbour; it keeps the best K by "
            "(similarity, lower index) and votes",
            "a float32 copy of the queries and a transposed float32 copy of the train shard, the "
            "label codes, and a top-K and vote over 2K candidates per query",
            "def solution(queries, train_features, train_labels, *, group):\n"
            "    k, classes = 20, 1000\n"
            "    world, rank = dist.get_world_size(group), dist.get_rank(group)\n"
            "    n_local = train_features.shape[0]\n"
            "    n_total = n_local * world\n"
            "    first = rank * n_local\n"
            "    index = torch.arange(first, first + n_local, device=train_labels.device)\n"
            "    codes = (index * classes + train_labels).view(1, n_local)\n"
            "    train_t = train_features.t().to(torch.float32, memory_format=torch.contiguous_format)\n"
            "    sims, got = _pkb_solution(queries.float().contiguous(), train_t, codes,\n"
            "                              min(2 * k, n_local), group)\n"
            "    sims = sims.float()\n"
            "    neighbor = torch.div(got, classes, rounding_mode='floor')\n"
            "    keys = torch.round(sims.double() * 65536.0).to(torch.int64) * n_total + (n_total - 1 - neighbor)\n"
            "    pos = keys.topk(k, dim=1, largest=True, sorted=True).indices\n"
            "    sims = torch.gather(sims, 1, pos)\n"
            "    labels = torch.gather(got.remainder(classes), 1, pos)\n"
            "    weights = torch.softmax(sims / 0.07, dim=1)\n"
            "    probs = torch.zeros(sims.shape[0], classes, dtype=torch.float32, device=sims.device)\n"
            "    probs.scatter_add_(1, labels, weights)\n"
            "    return probs, sims, labels\n"),
    Adapter(80, "ibot-patch-sinkhorn-knopp", "same arguments and shapes", "none",
            "def solution(teacher_output, teacher_temp, n_masked_patches_tensor, n_iterations, *,"
            " group):\n"
            "    return _pkb_solution(teacher_output, teacher_temp, n_masked_patches_tensor,\n"
            "                         n_iterations, group)\n"),
    # NO_OBJ_SCORE = -1024, IOU_THRESHOLD = 0.7: problems/other/sam3_iou_suppression.py.
    Adapter(81, "sam3-masklet-iou-suppression",
            "PKB writes -10 into suppressed masks, returns masks and scores in float32, takes "
            "scores as (n,) and the counts as a list; ours writes SAM's -1024, keeps the input "
            "dtype and (n, 1) scores. PKB's IoU threshold and order are passed as ours (0.7, "
            "later occlusion suppressed)",
            "the counts as a list (a host sync, as the reference makes), the suppressed masks "
            "rewritten, and for bfloat16 a copy of the gathered masks and scores back into it",
            "def solution(masks, scores, num_obj_per_gpu, last_occluded, *, group):\n"
            "    all_masks, all_scores, suppressed = _pkb_solution(\n"
            "        masks, scores.reshape(-1), num_obj_per_gpu.tolist(), last_occluded, 0.7, False, group)\n"
            "    all_masks = all_masks.to(masks.dtype)\n"
            "    all_masks[suppressed] = -1024.0\n"
            "    return all_masks, all_scores.to(scores.dtype).reshape(-1, 1), suppressed\n"),
)

ADAPTERS: tuple[Adapter, ...] = _GRAPHS + _SPATIAL + _VISION
