"""Oracles for the problems written so that every ParallelKernelBench problem maps to one of ours
(uneven gathers, the Kalman optimizer, GraphBolt's exchange backward, GraphStorm's ranking,
tile-parallel VAE decode, SAM 3's suppression and the composed/end-to-end forms).

Each rebuilds the global object from every rank's inputs and applies the dense math in float64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import WORLD, Inputs, xs

f64 = torch.float64


def uneven_gather(inputs: Inputs):
    lengths = torch.cat(xs(inputs, "length"))
    rows = torch.cat([i["x"][: int(i["length"])] for i in inputs])
    return [[rows, lengths] for _ in range(WORLD)]


def kalman(inputs: Inputs):
    lam = inputs[0]["kalman_lambda"].double()
    err = inputs[0]["error"].double()
    K = [torch.einsum("nij,nj->ni", i["P"].double(), i["H"].double()) for i in inputs]
    tmp = sum((lam + (i["H"].double() * k).sum(1)).sum() for i, k in zip(inputs, K))
    A = 1.0 / tmp
    weights = torch.cat([i["weights"].double() + A * err * k for i, k in zip(inputs, K)])
    nue = 0.9987
    return [[weights, (i["P"].double() - A * k[:, :, None] * k[:, None, :]) / lam,
             nue * lam + 1 - nue] for i, k in zip(inputs, K)]


def graphbolt_backward(inputs: Inputs):
    # Row k of rank i's grad_output goes to peer j (by counts_sent), lands there in order of
    # source rank, and is summed into seed seed_inverse_ids[position] of that peer.
    outs = []
    for j, dst in enumerate(inputs):
        rows = [torch.split(src["grad_output"].double(), src["counts_sent"].tolist())[j]
                for src in inputs]
        received = torch.cat(rows)
        assert received.shape[0] == int(dst["counts_received"].sum())
        grad = torch.zeros((dst["seed_size"], received.shape[1]), dtype=f64)
        grad.index_add_(0, dst["seed_inverse_ids"], received)
        outs.append([grad])
    return outs


def negative_ranking(inputs: Inputs):
    pos = torch.cat(xs(inputs, "pos_scores")).double()
    neg = torch.cat(xs(inputs, "neg_scores")).double()
    # The place of each positive after a descending sort with ties broken in its favour.
    scores = torch.cat([pos[:, None], neg], dim=1)
    order = torch.sort(-scores, dim=1, stable=True).indices
    ranks = (order == 0).nonzero()[:, 1] + 1
    return [[ranks] for _ in range(WORLD)]


def magi1_decode(inputs: Inputs):
    # Decode every tile in one process, cross-fade each with its raw predecessors, stitch.
    z, weight = inputs[0]["z"].double(), inputs[0]["weight"].double()
    tile, stride, (up_t, up_s) = inputs[0]["tile"], inputs[0]["stride"], inputs[0]["upsample"]
    scale = (up_t, up_s, up_s)
    grid = [(z.shape[2 + d] - tile[d]) // stride[d] + 1 for d in range(3)]
    decoded = {}
    for a in range(grid[0]):
        for b in range(grid[1]):
            for c in range(grid[2]):
                lo = (a * stride[0], b * stride[1], c * stride[2])
                piece = z[:, :, lo[0]:lo[0] + tile[0], lo[1]:lo[1] + tile[1], lo[2]:lo[2] + tile[2]]
                rgb = torch.einsum("oc,bcthw->bothw", weight, piece)
                decoded[(a, b, c)] = F.interpolate(rgb, scale_factor=scale, mode="trilinear",
                                                   align_corners=False)
    out = torch.zeros((1, 3) + tuple(z.shape[2 + d] * scale[d] for d in range(3)), dtype=f64)
    for ix, cur in decoded.items():
        cur = cur.clone()
        for d in range(3):
            if ix[d] == 0:
                continue
            prev = decoded[tuple(v - 1 if k == d else v for k, v in enumerate(ix))]
            e = (tile[d] - stride[d]) * scale[d]
            for i in range(e):
                sl = [slice(None)] * 5
                sl[2 + d] = i
                src = [slice(None)] * 5
                src[2 + d] = prev.shape[2 + d] - e + i
                cur[tuple(sl)] = prev[tuple(src)] * (1 - i / e) + cur[tuple(sl)] * (i / e)
        box = [slice(None), slice(None)]
        crop = [slice(None), slice(None)]
        for d in range(3):
            keep = tile[d] * scale[d] if ix[d] == grid[d] - 1 else stride[d] * scale[d]
            start = ix[d] * stride[d] * scale[d]
            box.append(slice(start, start + keep))
            crop.append(slice(0, keep))
        out[tuple(box)] = cur[tuple(crop)]
    return [[out] for _ in range(WORLD)]


def sam3_suppression(inputs: Inputs):
    masks = torch.cat(xs(inputs, "masks")).double()
    scores = torch.cat(xs(inputs, "scores"))
    last = inputs[0]["last_occluded"]
    n = masks.shape[0]
    binary = (masks > 0).flatten(1)
    suppressed = torch.zeros(n, dtype=torch.bool)
    for i in range(n):
        for j in range(i + 1, n):
            inter = (binary[i] & binary[j]).sum().item()
            union = max((binary[i] | binary[j]).sum().item(), 1)
            if inter / union < 0.7:
                continue
            if last[i] > last[j] > -1:
                suppressed[i] = True
            if last[j] > last[i] > -1:
                suppressed[j] = True
    out = masks.clone()
    out[suppressed] = -1024.0
    return [[out, scores, suppressed] for _ in range(WORLD)]


def _full_vocab(inputs: Inputs) -> torch.Tensor:
    # [B, S, V]: every rank's vocab slice side by side.
    return torch.cat(xs(inputs, "logits"), dim=-1).double()


def _kept(z: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    # Per row of [T, V]: the top-k tokens, then, among them, all but the low tail whose
    # cumulative probability (summed from the smallest) is at most 1 - top_p.
    kth = z.topk(top_k, dim=-1).values[:, -1:]
    topk = z >= kth
    p = torch.where(topk, z, torch.tensor(float("-inf"), dtype=f64)).softmax(-1)
    keep = torch.zeros_like(topk)
    for t in range(z.shape[0]):
        order = torch.sort(p[t], stable=True).indices
        below = torch.cumsum(p[t][order], 0)
        keep[t, order] = below > 1 - top_p
        keep[t, order[-1]] = True
    return keep & topk


def _logprobs_with_sampling(inputs: Inputs) -> torch.Tensor:
    z = _full_vocab(inputs)
    b, s, v = z.shape
    z = z.reshape(b * s, v)
    keep = _kept(z, inputs[0]["top_k"], inputs[0]["top_p"])
    logp = torch.where(keep, z, torch.tensor(float("-inf"), dtype=f64)).log_softmax(-1)
    return logp, keep


def logprobs_top_k_top_p(inputs: Inputs):
    logp, _ = _logprobs_with_sampling(inputs)
    target = inputs[0]["target"]
    picked = logp.gather(-1, target.reshape(-1, 1)).reshape(target.shape)
    return [[picked] for _ in range(WORLD)]


def logprobs_top_k_top_p_backward(inputs: Inputs):
    logp, keep = _logprobs_with_sampling(inputs)
    target = inputs[0]["target"].reshape(-1)
    onehot = torch.zeros_like(logp).scatter_(-1, target[:, None], 1.0)
    grad = (onehot - logp.exp()) * keep * inputs[0]["grad_output"].double().reshape(-1, 1)
    b, s = inputs[0]["target"].shape
    grad = grad.reshape(b, s, -1)
    return [[chunk] for chunk in grad.chunk(WORLD, dim=-1)]


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    # [B, S, H, D] each, the whole sequence, float64.
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * q.shape[-1] ** -0.5
    future = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool).triu(1)
    probs = scores.masked_fill(future, float("-inf")).softmax(-1)
    return torch.einsum("bhqk,bkhd->bqhd", probs, v)


def ring_attention_forward(inputs: Inputs):
    q, k, v = (torch.cat(xs(inputs, n), dim=1).double() for n in ("q", "k", "v"))
    return [[c] for c in _causal_attention(q, k, v).chunk(WORLD, dim=1)]


def _attention_layer(x: torch.Tensor, w_qkv: torch.Tensor, w_o: torch.Tensor,
                     heads: int) -> torch.Tensor:
    b, s, _ = x.shape
    q, k, v = (x @ w_qkv.double().T).view(b, s, 3, heads, -1).unbind(2)
    return _causal_attention(q, k, v).reshape(b, s, -1) @ w_o.double().T


def ring_attention_tp(inputs: Inputs):
    tp = 2  # on 4 ranks: TP groups [0, 1], [2, 3]; CP groups [0, 2], [1, 3]
    heads = inputs[0]["num_heads"] // tp
    x = torch.cat([inputs[r]["hidden"] for r in range(0, WORLD, tp)], dim=1).double()
    out = sum(_attention_layer(x, inputs[t]["w_qkv"], inputs[t]["w_o"], heads) for t in range(tp))
    chunks = out.chunk(WORLD // tp, dim=1)
    return [[chunks[r // tp]] for r in range(WORLD)]


def ring_attention_pp(inputs: Inputs):
    cp = WORLD // 2  # stage 0 on ranks 0, 1 and stage 1 on ranks 2, 3
    heads = inputs[0]["num_heads"]
    x = torch.cat([inputs[r]["hidden"] for r in range(cp)], dim=1).double()
    outs = []
    for stage in range(2):
        w = inputs[stage * cp]
        x = x + _attention_layer(x, w["w_qkv"], w["w_o"], heads)
        outs.append(x.chunk(cp, dim=1))
    return [[outs[r // cp][r % cp]] for r in range(WORLD)]


def fsdp_tp_mlp(inputs: Inputs):
    tp = fsdp = 2  # on 4 ranks: TP groups [0, 1], [2, 3]; FSDP groups [0, 2], [1, 3]
    def rank(f, t):
        return f * tp + t
    w1 = torch.cat([inputs[rank(f, t)]["w1"] for t in range(tp) for f in range(fsdp)]).double()
    w3 = torch.cat([inputs[rank(f, t)]["w3"] for t in range(tp) for f in range(fsdp)]).double()
    w2 = torch.cat([torch.cat([inputs[rank(f, t)]["w2"] for t in range(tp)], dim=1)
                    for f in range(fsdp)]).double()
    outs = []
    for i in inputs:
        x = i["x"].double()
        outs.append([(F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T])
    return outs


def _averaged_mlp_grad(inputs: Inputs, flat: torch.Tensor) -> torch.Tensor:
    # Autograd (independent of the references' hand-written backward) on every rank's batch,
    # the per-rank mean losses averaged.
    hidden = inputs[0]["hidden"]
    d_in, d_out = inputs[0]["x"].shape[1], inputs[0]["y"].shape[1]
    p = flat.clone().requires_grad_(True)
    sizes = [hidden * d_in, hidden, d_out * hidden, d_out]
    w1, b1, w2, b2 = torch.split(p[: sum(sizes)], sizes)
    w1, w2 = w1.view(hidden, d_in), w2.view(d_out, hidden)
    loss = sum(F.mse_loss(F.relu(i["x"].double() @ w1.T + b1) @ w2.T + b2, i["y"].double())
               for i in inputs) / WORLD
    loss.backward()
    return p.grad


def _adamw(p, g, m, v, step):
    beta1, beta2, eps, lr, wd = 0.9, 0.95, 1e-8, 1e-3, 0.1
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p - lr * wd * p - lr * (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + eps)
    return [p, m, v]


def ddp_step(inputs: Inputs):
    i = inputs[0]
    grad = _averaged_mlp_grad(inputs, i["params"].double())
    new = _adamw(i["params"].double(), grad, i["exp_avg"].double(), i["exp_avg_sq"].double(),
                 i["step"])
    return [new for _ in range(WORLD)]


def fsdp_step(inputs: Inputs):
    flat = torch.cat(xs(inputs, "param_shard")).double()
    m, v = (torch.cat(xs(inputs, n)).double() for n in ("exp_avg", "exp_avg_sq"))
    new = _adamw(flat, _averaged_mlp_grad(inputs, flat), m, v, inputs[0]["step"])
    return [[t.chunk(WORLD)[r] for t in new] for r in range(WORLD)]


def zero_step(inputs: Inputs):
    i = inputs[0]
    m, v = (torch.cat(xs(inputs, n)).double() for n in ("exp_avg", "exp_avg_sq"))
    p, m, v = _adamw(i["params"].double(), _averaged_mlp_grad(inputs, i["params"].double()), m, v,
                     i["step"])
    return [[p, m.chunk(WORLD)[r], v.chunk(WORLD)[r]] for r in range(WORLD)]


def graphbolt_forward(inputs: Inputs):
    # Rank j answers peer i with rows features_j[ids_j] cut by counts_received_j; peer i stacks
    # what every j sent it in rank order.
    answers = [torch.split(i["features"][i["seed_inverse_ids"]], i["counts_received"].tolist())
               for i in inputs]
    return [[torch.cat([answers[j][i] for j in range(WORLD)])] for i in range(WORLD)]


def column_gather_output(inputs: Inputs):
    weight = torch.cat(xs(inputs, "weight_shard")).double()
    logits = inputs[0]["x"].double() @ weight.T
    return [[logits] for _ in range(WORLD)]


def ibot_sinkhorn(inputs: Inputs):
    scores = torch.cat(xs(inputs, "teacher_output")).double()
    q = torch.exp(scores / inputs[0]["teacher_temp"]).T
    k, b = q.shape
    q = q / q.sum()
    for _ in range(inputs[0]["n_iterations"]):
        q = q / q.sum(dim=1, keepdim=True) / k
        q = q / q.sum(dim=0, keepdim=True) / b
    out = (q * b).T
    return [[part] for part in torch.split(out, [int(i["n_masked_patches_tensor"]) for i in inputs])]


ORACLES = {
    "uneven-sequence-all-gather": (uneven_gather, 0.0),
    "deepmd-kalman-optimizer-step": (kalman, 1e-5),
    "graphbolt-feature-exchange-backward": (graphbolt_backward, 1e-5),
    "graphstorm-negative-ranking": (negative_ranking, 0.0),
    "graphbolt-feature-exchange": (graphbolt_forward, 0.0),
    "magi1-tile-parallel-vae-decode": (magi1_decode, 1e-5),
    "sam3-masklet-iou-suppression": (sam3_suppression, 0.0),
    "vocab-parallel-logprobs-top-k-top-p": (logprobs_top_k_top_p, 1e-5),
    "vocab-parallel-logprobs-top-k-top-p-chunked": (logprobs_top_k_top_p, 1e-5),
    "vocab-parallel-logprobs-top-k-top-p-backward": (logprobs_top_k_top_p_backward, 1e-5),
    "ring-attention-forward": (ring_attention_forward, 1e-5),
    "ring-attention-tp": (ring_attention_tp, 1e-5),
    "ring-attention-pp": (ring_attention_pp, 1e-5),
    "fsdp-tp-swiglu-mlp": (fsdp_tp_mlp, 1e-5),
    "ddp-training-step": (ddp_step, 1e-5),
    "fsdp-training-step": (fsdp_step, 1e-5),
    "zero1-training-step": (zero_step, 1e-5),
    "zero2-training-step": (zero_step, 1e-5),
    "tp-column-linear-gather-output": (column_gather_output, 1e-5),
    "ibot-patch-sinkhorn-knopp": (ibot_sinkhorn, 1e-5),
}
