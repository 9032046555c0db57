"""Oracles for the tensor-parallel (4xx), sequence-parallel (5xx) and vocab-parallel (6xx)
families: the unsharded layer each problem splits, in float64, with autograd for the backward
problems and brute-force Python loops for the samplers.

Shards are reassembled from every rank's inputs (rank r owns block r of the sharded dimension,
as the descriptions state) and the expected output of rank r is cut from the dense result.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import WORLD, Inputs, each, xs


def cat(inputs: Inputs, name: str, dim: int = 0) -> torch.Tensor:
    """Input ``name`` of every rank, concatenated along ``dim`` in rank order, in float64."""
    return torch.cat(xs(inputs, name), dim=dim).double()


def silu(t: torch.Tensor) -> torch.Tensor:
    return t / (1.0 + torch.exp(-t))


# ----------------------------------------------------------------------------- tensor parallel


def allgather_gemm_backward(inputs: Inputs) -> list[list[torch.Tensor]]:
    # Forward: Y = X @ W^T with X sharded by tokens and W by output rows; rank r holds Y[:, block r].
    x = cat(inputs, "x_shard").requires_grad_()
    w = cat(inputs, "weight_shard").requires_grad_()
    dx, dw = torch.autograd.grad(x @ w.t(), (x, w), cat(inputs, "grad_output", dim=1))
    return [[dx.chunk(WORLD)[r], dw.chunk(WORLD)[r]] for r in range(WORLD)]


def allreduce_residual_rmsnorm(inputs: Inputs) -> list[list[torch.Tensor]]:
    residual = torch.stack(xs(inputs)).double().sum(0) + inputs[0]["residual"].double()
    gamma = inputs[0]["gamma"].double()
    norm = residual / torch.sqrt((residual * residual).mean(-1, keepdim=True) + 1e-6) * gamma
    return [[norm, residual] for _ in range(WORLD)]


def attention_oproj(inputs: Inputs) -> list[list[torch.Tensor]]:
    # Whole attention layer: all query heads, all KV heads, the full output projection.
    q = cat(inputs, "query", dim=2)  # [seq, batch, heads, d]
    k = cat(inputs, "key", dim=2)  # [seq, batch, kv_heads, d]
    v = cat(inputs, "value", dim=2)
    seq, batch, heads, d = q.shape
    per_kv = heads // k.shape[2]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    context = torch.empty_like(q)
    for h in range(heads):
        kv = h // per_kv  # consecutive query heads share one KV head
        scores = torch.einsum("sbd,tbd->bst", q[:, :, h], k[:, :, kv]) / math.sqrt(d)
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        context[:, :, h] = torch.einsum("bst,tbd->sbd", probs, v[:, :, kv])
    w = cat(inputs, "proj_weight_shard", dim=1)  # [hidden, heads * d]
    out = context.reshape(seq, batch, heads * d) @ w.t()
    return each(lambda r: out)


def column_linear_backward(inputs: Inputs) -> list[list[torch.Tensor]]:
    # Forward: Y = X @ W^T + b with W and b split by output rows; rank r holds Y[:, block r].
    x = inputs[0]["x"].double().requires_grad_()
    w = cat(inputs, "weight_shard").requires_grad_()
    b = torch.zeros(w.shape[0], dtype=torch.float64, requires_grad=True)
    dx, dw, db = torch.autograd.grad(x @ w.t() + b, (x, w, b), cat(inputs, "grad_output", dim=1))
    return [[dx, dw.chunk(WORLD)[r], db.chunk(WORLD)[r]] for r in range(WORLD)]


def decode_allreduce(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs)).double().sum(0)
    return each(lambda r: total)


def fused_allgather_matmul(inputs: Inputs) -> list[list[torch.Tensor]]:
    a = cat(inputs, "a_shard", dim=1)  # [batch, seq, hidden]
    return [[a, a @ inputs[r]["b_gate"].double(), a @ inputs[r]["b_up"].double()]
            for r in range(WORLD)]


def fused_matmul_reducescatter(inputs: Inputs) -> list[list[torch.Tensor]]:
    y = cat(inputs, "a", dim=-1) @ cat(inputs, "b")  # [batch, seq, hidden]
    return each(lambda r: y.chunk(WORLD, dim=1)[r])


def _rotate(t: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    # Rotary embedding, non-interleaved: dims (i, i + d/2) form the pair rotated by pos * base^(-2i/d).
    seq, d = t.shape[0], t.shape[-1]
    half = d // 2
    out = torch.empty_like(t)
    for pos in range(seq):
        for i in range(half):
            angle = pos * base ** (-2.0 * i / d)
            c, s = math.cos(angle), math.sin(angle)
            a, b = t[pos, ..., i], t[pos, ..., i + half]
            out[pos, ..., i] = a * c - b * s
            out[pos, ..., i + half] = b * c + a * s
    return out


def qkv_gqa_rope(inputs: Inputs) -> list[list[torch.Tensor]]:
    heads, kv_heads = int(inputs[0]["heads"]), int(inputs[0]["kv_heads"])
    per_kv = heads // kv_heads
    x = cat(inputs, "x_shard")  # [seq, batch, hidden]
    w = cat(inputs, "qkv_weight_shard")  # KV groups in order, each: its query heads, key, value
    d = w.shape[0] // (kv_heads * (per_kv + 2))
    rows = w.view(kv_heads, per_kv + 2, d, -1)
    wq = rows[:, :per_kv].reshape(heads, d, -1)
    wk, wv = rows[:, per_kv], rows[:, per_kv + 1]  # [kv_heads, d, hidden]
    q = _rotate(torch.einsum("sbk,hdk->sbhd", x, wq))
    k = _rotate(torch.einsum("sbk,hdk->sbhd", x, wk))
    v = torch.einsum("sbk,hdk->sbhd", x, wv)
    return [[q.chunk(WORLD, dim=2)[r], k.chunk(WORLD, dim=2)[r], v.chunk(WORLD, dim=2)[r]]
            for r in range(WORLD)]


def row_linear_allreduce(inputs: Inputs) -> list[list[torch.Tensor]]:
    y = cat(inputs, "x_parallel", dim=-1) @ cat(inputs, "weight_shard", dim=1).t()
    y = y + inputs[0]["bias"].double()
    return each(lambda r: y)


def sp_layernorm_backward(inputs: Inputs) -> list[list[torch.Tensor]]:
    x = cat(inputs, "x_shard").requires_grad_()
    gamma = inputs[0]["gamma"].double().requires_grad_()
    beta = torch.zeros_like(gamma, requires_grad=True)
    y = F.layer_norm(x, (x.shape[-1],), gamma, beta, 1e-5)
    dx, dgamma, dbeta = torch.autograd.grad(y, (x, gamma, beta), cat(inputs, "grad_output"))
    return [[dx.chunk(WORLD)[r], dgamma, dbeta] for r in range(WORLD)]


def summa_2d_linear(inputs: Inputs) -> list[list[torch.Tensor]]:
    # 2 x 2 grid, rank = 2 * row + col: X[batch block row, :, hidden block col] and
    # W[hidden block row, out block col] (W is [hidden, out]).
    q = 2
    at = lambda i, j, name: inputs[q * i + j][name].double()  # noqa: E731
    x = torch.cat([torch.cat([at(i, j, "x_block") for j in range(q)], dim=-1) for i in range(q)])
    w = torch.cat([torch.cat([at(i, j, "weight_block") for j in range(q)], dim=1) for i in range(q)])
    y = x @ w  # [batch, seq, out]
    return [[y.chunk(q, dim=0)[r // q].chunk(q, dim=-1)[r % q]] for r in range(WORLD)]


def swiglu_mlp(inputs: Inputs) -> list[list[torch.Tensor]]:
    x = inputs[0]["hidden_states"].double()
    fc1 = [w.double() for w in xs(inputs, "fc1_weight_shard")]
    gate = torch.cat([w[: w.shape[0] // 2] for w in fc1])  # [ffn, hidden]
    up = torch.cat([w[w.shape[0] // 2:] for w in fc1])
    down = cat(inputs, "fc2_weight_shard", dim=1)  # [hidden, ffn]
    y = (silu(x @ gate.t()) * (x @ up.t())) @ down.t()
    return each(lambda r: y)


def tp_dp_grad_finalize(inputs: Inputs) -> list[list[torch.Tensor]]:
    # Megatron grid on 4 ranks: tp = 2 consecutive ranks, dp = 2 strided (rank = dp_index * tp + tp_index).
    tp = WORLD // 2
    dp = WORLD // tp

    def dp_mean(name: str, r: int) -> torch.Tensor:
        return torch.stack([inputs[d * tp + r % tp][name].double() for d in range(dp)]).sum(0) / dp

    out = []
    for r in range(WORLD):
        tp_peers = [(r // tp) * tp + t for t in range(tp)]
        sp = torch.stack([dp_mean("sp_grads", p) for p in tp_peers]).sum(0)
        avg = torch.stack([dp_mean("tp_avg_grads", p) for p in tp_peers]).sum(0) / tp
        out.append([dp_mean("grad_buffer", r), sp, avg])
    return out


# --------------------------------------------------------------------------- sequence parallel


def layernorm_allgather(inputs: Inputs) -> list[list[torch.Tensor]]:
    x = cat(inputs, "x_shard")
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + 1e-5) * inputs[0]["ln_weight"].double() \
        + inputs[0]["ln_bias"].double()
    return each(lambda r: y)


def reducescatter_bias_dropout_add(inputs: Inputs) -> list[list[torch.Tensor]]:
    total = torch.stack(xs(inputs, "partial")).double().sum(0)
    bias = inputs[0]["bias"].double()

    def rank_out(r: int) -> torch.Tensor:
        keep = inputs[r]["keep_mask"].double()
        return inputs[r]["residual"].double() + (total.chunk(WORLD)[r] + bias) * keep / 0.9

    return each(rank_out)


def ulysses_all_to_all_inverse(inputs: Inputs) -> list[list[torch.Tensor]]:
    full = torch.cat(xs(inputs, "context"), dim=2)  # [seq, batch, heads, d]: heads by rank
    return each(lambda r: full.chunk(WORLD, dim=0)[r])


def ulysses_qkv_packed(inputs: Inputs) -> list[list[torch.Tensor]]:
    seq = inputs[0]["unpadded_seq"]
    full = torch.cat(xs(inputs, "qkv"), dim=1)[:, :seq]  # [batch, seq, 3 * heads * d]
    q, k, v = full.chunk(3, dim=-1)
    return each(lambda r: torch.cat([t.chunk(WORLD, dim=-1)[r] for t in (q, k, v)], dim=-1))


# ------------------------------------------------------------------------------ vocab parallel


def cross_entropy_backward(inputs: Inputs) -> list[list[torch.Tensor]]:
    logits = cat(inputs, "logits", dim=-1).requires_grad_()
    loss = F.cross_entropy(logits, inputs[0]["target"], reduction="none")
    (grad,) = torch.autograd.grad(loss, logits, inputs[0]["grad_loss"].double())
    return [[loss.detach(), grad.chunk(WORLD, dim=-1)[r]] for r in range(WORLD)]


def embedding(inputs: Inputs) -> list[list[torch.Tensor]]:
    table = torch.cat(xs(inputs, "weight"))
    return each(lambda r: table[inputs[0]["input_ids"]])


def entropy(inputs: Inputs) -> list[list[torch.Tensor]]:
    logp = torch.log_softmax(cat(inputs, "logits", dim=-1), dim=-1)
    h = -(logp.exp() * logp).sum(-1)
    return each(lambda r: h)


def logprobs(inputs: Inputs) -> list[list[torch.Tensor]]:
    logp = torch.log_softmax(cat(inputs, "logits", dim=-1), dim=-1)[:, :-1]  # [B, S-1, V]
    target = inputs[0]["input_ids"][:, 1:]
    picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return each(lambda r: picked)


def _ranked(row: list[float]) -> list[int]:
    """Token ids by descending logit, ties broken by the lower id (a plain sort)."""
    return sorted(range(len(row)), key=lambda v: (-row[v], v))


def _draw(weights: list[float], u: float) -> int:
    """First position whose cumulative weight exceeds u * total weight."""
    threshold = u * sum(weights)
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if acc > threshold:
            return i
    return len(weights) - 1


def topk_sampling(inputs: Inputs) -> list[list[torch.Tensor]]:
    logits = torch.cat(xs(inputs, "logits"), dim=-1)
    kmax = inputs[0]["max_top_k"]
    sampled, ids, vals = [], [], []
    for b, row in enumerate(logits.tolist()):
        top = _ranked(row)[:kmax]
        ids.append(top)
        vals.append([row[v] for v in top])
        temp = float(inputs[0]["temperature"][b])
        if temp == 0.0:
            sampled.append(top[0])
            continue
        k = int(inputs[0]["top_k"][b])
        scaled = [row[v] / temp for v in top[:k]]
        weights = [math.exp(s - max(scaled)) for s in scaled]
        sampled.append(top[_draw(weights, float(inputs[0]["uniform"][b]))])
    out = [torch.tensor(sampled), torch.tensor(ids), torch.tensor(vals, dtype=logits.dtype)]
    return [list(out) for _ in range(WORLD)]


def topp_sampling(inputs: Inputs) -> list[list[torch.Tensor]]:
    logits = torch.cat(xs(inputs, "logits"), dim=-1)
    sampled, sizes = [], []
    for b, row in enumerate(logits.tolist()):
        order = _ranked(row)
        temp = float(inputs[0]["temperature"][b])
        top_p = float(inputs[0]["top_p"][b])
        scaled = [row[v] / temp for v in order]
        weights = [math.exp(s - scaled[0]) for s in scaled]
        total = sum(weights)
        probs = [w / total for w in weights]
        nucleus, before = 0, 0.0
        for p in probs:
            if nucleus > 0 and before > top_p:
                break
            nucleus += 1
            before += p
        sizes.append(nucleus)
        sampled.append(order[_draw(probs[:nucleus], float(inputs[0]["uniform"][b]))])
    return [[torch.tensor(sampled), torch.tensor(sizes)] for _ in range(WORLD)]


ORACLES = {
    "tp-allgather-gemm-backward": (allgather_gemm_backward, 1e-4),
    "tp-allreduce-residual-rmsnorm": (allreduce_residual_rmsnorm, 1e-5),
    "tp-attention-oproj": (attention_oproj, 1e-4),
    "tp-column-linear-backward": (column_linear_backward, 1e-4),
    "tp-decode-allreduce": (decode_allreduce, 1e-5),
    "tp-fused-allgather-matmul": (fused_allgather_matmul, 1e-4),
    "tp-fused-matmul-reducescatter": (fused_matmul_reducescatter, 1e-4),
    "tp-qkv-gqa-rope": (qkv_gqa_rope, 1e-4),
    "tp-row-linear-allreduce": (row_linear_allreduce, 1e-4),
    "tp-sp-layernorm-backward": (sp_layernorm_backward, 1e-4),
    "tp-summa-2d-linear": (summa_2d_linear, 1e-4),
    "tp-swiglu-mlp": (swiglu_mlp, 1e-4),
    "tp-dp-grad-finalize": (tp_dp_grad_finalize, 1e-5),
    "sp-layernorm-allgather": (layernorm_allgather, 1e-5),
    "sp-reducescatter-bias-dropout-add": (reducescatter_bias_dropout_add, 1e-5),
    "ulysses-all-to-all-inverse": (ulysses_all_to_all_inverse, 0.0),
    "ulysses-qkv-packed": (ulysses_qkv_packed, 0.0),
    "vocab-parallel-cross-entropy-backward": (cross_entropy_backward, 1e-6),
    "vocab-parallel-embedding": (embedding, 0.0),
    "vocab-parallel-entropy": (entropy, 1e-5),
    "vocab-parallel-logprobs": (logprobs, 1e-5),
    "vocab-parallel-topk-sampling": (topk_sampling, 0.0),
    "vocab-parallel-topp-sampling": (topp_sampling, 0.0),
}
