"""Oracles for context-parallel (7xx) and inference (9xx) problems.

Attention problems: full (unsharded) attention over the whole sequence in float64, with the
mask the problem defines (causal, sliding window, none), sliced to each rank's tokens; the
zigzag layout puts global chunks r and 2P-1-r on rank r. The ring backward is autograd through
the full-sequence attention. State-passing problems (linear attention, Mamba-2) are a plain
sequential scan over the whole sequence. Inference problems: the dense layer / full logits /
plain copies, written token by token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import WORLD, Inputs, each, xs

D = torch.float64


# ---------------------------------------------------------------- helpers

def _zigzag_full(parts: list[torch.Tensor], dim: int = 1) -> torch.Tensor:
    """Every rank's [.., 2C, ..] zigzag block (chunks r, 2P-1-r) -> the sequence in order."""
    chunks: list[torch.Tensor | None] = [None] * (2 * WORLD)
    for r, t in enumerate(parts):
        first, second = t.chunk(2, dim=dim)
        chunks[r], chunks[2 * WORLD - 1 - r] = first, second
    return torch.cat(chunks, dim=dim)


def _zigzag_part(full: torch.Tensor, r: int, dim: int = 1) -> torch.Tensor:
    chunks = full.chunk(2 * WORLD, dim=dim)
    return torch.cat([chunks[r], chunks[2 * WORLD - 1 - r]], dim=dim)


def _attention(q, k, v, visible=None):
    """q: [B, Sq, H, D]; k, v: [B, Sk, Hkv, D] (query head h uses kv head h // (H/Hkv));
    visible: [Sq, Sk] bool or None. Returns (out [B, Sq, H, D], lse [B, H, Sq]) in float64."""
    q, k, v = q.to(D), k.to(D), v.to(D)
    rep = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, dim=-1), v), lse


def _causal(n: int) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril()


# ---------------------------------------------------------------- context parallel (7xx)

def ring_attention_step(inputs: Inputs):
    # Dense math of one step: the running (out, lse) stands for exp(lse) mass of earlier keys
    # with weighted value sum exp(lse) * out; add the held block's keys and renormalise.
    result = []
    for r, i in enumerate(inputs):
        q, k, v = i["q"].to(D), i["k"].to(D), i["v"].to(D)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5  # [B, H, S, S]
        lse0 = i["lse"].to(D)  # [B, H, S]
        out0 = i["out"].to(D).permute(0, 2, 1, 3)  # [B, H, S, D]
        all_scores = torch.cat([lse0.unsqueeze(-1), scores], dim=-1)
        new_lse = torch.logsumexp(all_scores, dim=-1)
        w = torch.exp(all_scores - new_lse.unsqueeze(-1))
        new_out = w[..., :1] * out0 + torch.einsum("bhqk,bkhd->bhqd", w[..., 1:], v)
        prev = inputs[(r - 1) % WORLD]
        result.append([new_out.permute(0, 2, 1, 3), new_lse, prev["k"], prev["v"]])
    return result


def zigzag_ring_attention_fwd(inputs: Inputs):
    q, k, v = (_zigzag_full(xs(inputs, n)) for n in ("q", "k", "v"))
    out, lse = _attention(q, k, v, _causal(q.shape[1]))
    return [[_zigzag_part(out, r), _zigzag_part(lse, r, dim=2)] for r in range(WORLD)]


def zigzag_ring_attention_bwd(inputs: Inputs):
    # Autograd through the full causal attention in the flash-attention form the problem
    # states: probabilities from the saved lse, P = exp(S - lse), and the softmax term
    # delta = rowsum(dout * out) from the saved out. L = <dout, P V> - <delta, rowsum(P)> has
    # dL/dV = P^T dout and dL/dS = P * (dout V^T - delta), i.e. exactly the attention backward
    # (it equals autograd of <dout, softmax(S) V> when lse and out come from the forward).
    q, k, v, out, dout = (_zigzag_full(xs(inputs, n)).to(D) for n in ("q", "k", "v", "out", "dout"))
    lse = _zigzag_full(xs(inputs, "lse"), dim=2).to(D)  # [B, H, S]
    q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~_causal(q.shape[1]), float("-inf"))
    probs = torch.exp(scores - lse.unsqueeze(-1))
    delta = (dout * out).sum(-1).transpose(1, 2)  # [B, H, S]
    loss = (torch.einsum("bhqk,bkhd->bqhd", probs, v) * dout).sum() - (delta * probs.sum(-1)).sum()
    dq, dk, dv = torch.autograd.grad(loss, (q, k, v))
    return [[_zigzag_part(g, r) for g in (dq, dk, dv)] for r in range(WORLD)]


def allgather_kv_attention(inputs: Inputs):
    q, k, v = (_zigzag_full(xs(inputs, n)) for n in ("q", "k", "v"))
    out, _ = _attention(q, k, v, _causal(q.shape[1]))
    return each(lambda r: _zigzag_part(out, r))


def ulysses_cp_attention(inputs: Inputs):
    q, k, v = (torch.cat(xs(inputs, n), dim=1) for n in ("q", "k", "v"))
    out, _ = _attention(q, k, v, _causal(q.shape[1]))
    return each(lambda r: out.chunk(WORLD, dim=1)[r])


def causal_conv1d_halo(inputs: Inputs):
    x = torch.cat(xs(inputs), dim=1).to(D)  # [B, T, D]
    w, bias = inputs[0]["weight"].to(D), inputs[0]["bias"].to(D)  # [D, W], [D]
    width = w.shape[1]
    # PyTorch conv1d is a cross-correlation: left-pad W-1 zeros for the causal conv.
    y = F.conv1d(F.pad(x.transpose(1, 2), (width - 1, 0)), w.unsqueeze(1), bias,
                 groups=x.shape[-1]).transpose(1, 2)
    y = F.silu(y)
    return each(lambda r: y.chunk(WORLD, dim=1)[r])


def linear_attention_state(inputs: Inputs):
    q, k, v = (torch.cat(xs(inputs, n), dim=1).to(D) for n in ("q", "k", "v"))
    g = torch.cat(xs(inputs, "g"), dim=1).to(D)
    b, t, h, kd = q.shape
    q = q * kd ** -0.5
    state = torch.zeros(b, h, kd, v.shape[-1], dtype=D)
    out = []
    for i in range(t):
        state = torch.exp(g[:, i]).view(b, h, 1, 1) * state + torch.einsum(
            "bhk,bhv->bhkv", k[:, i], v[:, i])
        out.append(torch.einsum("bhkv,bhk->bhv", state, q[:, i]))
    o = torch.stack(out, dim=1)
    return each(lambda r: o.chunk(WORLD, dim=1)[r])


def mamba2_state_passing(inputs: Inputs):
    x, dt, B, C = (torch.cat(xs(inputs, n), dim=1).to(D) for n in ("x", "dt", "B", "C"))
    A, Dskip = inputs[0]["A"].to(D), inputs[0]["D"].to(D)
    b, t, h, p = x.shape
    rep = h // B.shape[2]
    state = torch.zeros(b, h, B.shape[-1], p, dtype=D)  # [N, P] per head
    ys = []
    for i in range(t):
        Bi = B[:, i].repeat_interleave(rep, dim=1)  # [b, H, N]
        Ci = C[:, i].repeat_interleave(rep, dim=1)
        decay = torch.exp(dt[:, i] * A).view(b, h, 1, 1)
        state = decay * state + dt[:, i].view(b, h, 1, 1) * torch.einsum("bhn,bhp->bhnp", Bi, x[:, i])
        ys.append(torch.einsum("bhnp,bhn->bhp", state, Ci) + Dskip.view(1, h, 1) * x[:, i])
    y = torch.stack(ys, dim=1)
    return each(lambda r: y.chunk(WORLD, dim=1)[r])


def sliding_window_attention(inputs: Inputs):
    q, k, v = (torch.cat(xs(inputs, n), dim=1) for n in ("q", "k", "v"))
    window = inputs[0]["window"]
    n = q.shape[1]
    pos = torch.arange(n)
    visible = (pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - window)
    out, _ = _attention(q, k, v, visible)
    return each(lambda r: out.chunk(WORLD, dim=1)[r])


def cp_loss_reduction(inputs: Inputs):
    logits = torch.cat(xs(inputs, "logits")).to(D)
    labels = torch.cat(xs(inputs, "labels"))
    mask = torch.cat(xs(inputs, "loss_mask")).to(D)
    loss = F.cross_entropy(logits, labels, reduction="none")
    mean = (loss * mask).sum() / mask.sum()
    return [[loss.chunk(WORLD)[r], mean] for r in range(WORLD)]


def dcp_decode_merge(inputs: Inputs):
    # Decode attention of the (replicated) query over the whole context = every rank's shard.
    q = inputs[0]["q"].unsqueeze(1)  # [B, 1, H, D]
    k = torch.cat(xs(inputs, "k_cache"), dim=1)
    v = torch.cat(xs(inputs, "v_cache"), dim=1)
    out, _ = _attention(q, k, v)
    out = out.squeeze(1)  # [B, H, D]
    return each(lambda r: out.chunk(WORLD, dim=1)[r])


def hyena_long_conv(inputs: Inputs):
    x = _zigzag_full(xs(inputs), dim=2).to(D)  # [B, Dch, L] in sequence order
    h = torch.cat(xs(inputs, "h")).to(D)  # [Dch, L]: rank r holds channels r D/P ..
    bias = inputs[0]["bias"].to(D)
    seq = x.shape[-1]
    # Direct causal convolution y[c, t] = sum_{s <= t} h[c, t - s] x[c, s] (a Toeplitz matrix).
    lag = torch.arange(seq)[:, None] - torch.arange(seq)[None, :]  # [t, s]
    toeplitz = h[:, lag.clamp(min=0)] * (lag >= 0)  # [Dch, t, s]
    y = torch.einsum("cts,bcs->bct", toeplitz, x) + bias.view(1, -1, 1) * x
    return each(lambda r: _zigzag_part(y, r, dim=2))


def video_temporal_attention(inputs: Inputs):
    q, k, v = (torch.cat(xs(inputs, n), dim=1) for n in ("q", "k", "v"))  # [B, T, S, H, D]
    b, t, s, h, d = q.shape
    # Each spatial patch is its own sequence over the T frames: fold patches into the batch.
    fold = lambda z: z.permute(0, 2, 1, 3, 4).reshape(b * s, t, h, d)  # noqa: E731
    out, _ = _attention(fold(q), fold(k), fold(v))
    out = out.reshape(b, s, t, h, d).permute(0, 2, 1, 3, 4)
    return each(lambda r: out.chunk(WORLD, dim=1)[r])


# ---------------------------------------------------------------- inference (9xx)

def disagg_kv_transfer(inputs: Inputs):
    half = WORLD // 2
    result = []
    for r, i in enumerate(inputs):
        k, v = i["k_buffer"].clone(), i["v_buffer"].clone()
        if r >= half:
            src = inputs[r - half]
            for dst_page, src_page in zip(i["page_ids"].tolist(), src["page_ids"].tolist()):
                k[:, dst_page] = src["k_buffer"][:, src_page]
                v[:, dst_page] = src["v_buffer"][:, src_page]
        result.append([k, v])
    return result


def spec_decode_verify(inputs: Inputs):
    logits = torch.cat(xs(inputs, "logits_shard"), dim=1)
    drafts = inputs[0]["draft_token_ids"]
    r, kd = drafts.shape
    target = logits.argmax(dim=-1).view(r, kd + 1).tolist()  # argmax: first index on ties
    out = torch.full((r, kd + 1), -1, dtype=torch.int64)
    for req in range(r):
        for pos in range(kd + 1):
            out[req, pos] = target[req][pos]
            if pos == kd or drafts[req, pos].item() != target[req][pos]:
                break
    return each(lambda rank: out)


def _swiglu(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate.t()) * (x @ w_up.t())) @ w_down.t()


def decode_moe_allgather(inputs: Inputs):
    e_local = inputs[0]["w13"].shape[0]
    inter = inputs[0]["w2"].shape[2]
    result = []
    for i in inputs:
        out = torch.zeros(i["hidden"].shape, dtype=D)
        for tok in range(i["hidden"].shape[0]):
            x = i["hidden"][tok].to(D)
            for e, wt in zip(i["topk_ids"][tok].tolist(), i["topk_weights"][tok].tolist()):
                owner = inputs[e // e_local]
                w13, w2 = owner["w13"][e % e_local].to(D), owner["w2"][e % e_local].to(D)
                out[tok] += wt * _swiglu(x, w13[:inter], w13[inter:], w2)
        result.append([out])
    return result


def dp_attention_gather_mlp(inputs: Inputs):
    # The full dense MLP: gate rows, up rows and down columns of every TP shard, in rank order.
    inter_p = inputs[0]["w_down"].shape[1]
    w_gate = torch.cat([i["w_gate_up"][:inter_p] for i in inputs]).to(D)
    w_up = torch.cat([i["w_gate_up"][inter_p:] for i in inputs]).to(D)
    w_down = torch.cat(xs(inputs, "w_down"), dim=1).to(D)
    return each(lambda r: _swiglu(inputs[r]["hidden"].to(D), w_gate, w_up, w_down))


ORACLES = {
    "ring-attention-step": (ring_attention_step, 1e-5),
    "zigzag-ring-attention-fwd": (zigzag_ring_attention_fwd, 1e-5),
    "zigzag-ring-attention-bwd": (zigzag_ring_attention_bwd, 1e-5),
    "cp-allgather-kv-attention": (allgather_kv_attention, 1e-5),
    "ulysses-cp-attention": (ulysses_cp_attention, 1e-5),
    "cp-causal-conv1d-halo": (causal_conv1d_halo, 1e-5),
    "cp-linear-attention-state-merge": (linear_attention_state, 1e-5),
    "cp-mamba2-serial-state-passing": (mamba2_state_passing, 1e-5),
    "cp-sliding-window-attention": (sliding_window_attention, 1e-5),
    "cp-loss-token-reduction": (cp_loss_reduction, 1e-5),
    "dcp-decode-attention-merge": (dcp_decode_merge, 1e-5),
    "hyena-cp-a2a-long-conv": (hyena_long_conv, 1e-5),
    "video-dsp-temporal-attention": (video_temporal_attention, 1e-5),
    "disagg-kv-cache-transfer": (disagg_kv_transfer, 0.0),
    "tp-speculative-greedy-verify": (spec_decode_verify, 0.0),
    "decode-moe-allgather-dispatch": (decode_moe_allgather, 1e-5),
    "dp-attention-gather-mlp-scatter": (dp_attention_gather_mlp, 1e-5),
}
