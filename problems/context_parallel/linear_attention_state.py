"""Gated linear attention under context parallelism: all-gather per-rank states, prefix-merge."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _chunked_gla(q, k, v, g, chunk, initial=None):
    """Chunked scalar-gated linear attention in float32.

    q, k: [B, T, H, K]; v: [B, T, H, V]; g: [B, T, H] log-decays (<= 0), so the state follows
    S_t = exp(g_t) S_{t-1} + k_t v_t^T and o_t = S_t^T q_t. initial: [B, H, K, V] or None.
    Returns (o [B, T, H, V] without the initial state's part, the state-free final state
    S_ext [B, H, K, V], the per-token cumulative log-decay G [B, T, H]).
    """
    b, t, h, kd = q.shape
    vd = v.shape[-1]
    n = t // chunk
    G = torch.cumsum(g, dim=1)  # [B, T, H]
    qc = q.view(b, n, chunk, h, kd)
    kc = k.view(b, n, chunk, h, kd)
    vc = v.view(b, n, chunk, h, vd)
    Gc = G.view(b, n, chunk, h)
    g_end = Gc[:, :, -1]  # [B, N, H]
    g_start = torch.cat([torch.zeros_like(g_end[:, :1]), g_end[:, :-1]], dim=1)  # [B, N, H]
    # Intra-chunk: sum_{s<=t} exp(G_t - G_s) (q_t . k_s) v_s.
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    diff = Gc.unsqueeze(3) - Gc.unsqueeze(2)  # [B, N, C(t), C(s), H]
    decay = torch.exp(diff.masked_fill(~causal.view(1, 1, chunk, chunk, 1), float("-inf")))
    att = torch.einsum("bnthk,bnshk->bntsh", qc, kc) * decay
    o = torch.einsum("bntsh,bnshv->bnthv", att, vc)
    # Chunk states from zero: S_m = sum_{s in m} exp(G_end_m - G_s) k_s v_s^T.
    kw = kc * torch.exp(g_end.unsqueeze(2) - Gc).unsqueeze(-1)
    s_chunk = torch.einsum("bnshk,bnshv->bnhkv", kw, vc)  # [B, N, H, K, V]
    # State entering chunk n: sum_{m<n} exp(G_start_n - G_end_m) S_m (+ exp(G_start_n) S_in).
    lower = torch.ones(n, n, dtype=torch.bool, device=q.device).tril(-1)  # m < n
    cross = g_start.unsqueeze(2) - g_end.unsqueeze(1)  # [B, N(n), N(m), H]
    w = torch.exp(cross.masked_fill(~lower.view(1, n, n, 1), float("-inf")))
    h_in = torch.einsum("bnmh,bmhkv->bnhkv", w, s_chunk)
    if initial is not None:
        h_in = h_in + torch.exp(g_start).unsqueeze(-1).unsqueeze(-1) * initial.unsqueeze(1)
    qg = qc * torch.exp(Gc - g_start.unsqueeze(2)).unsqueeze(-1)
    o = o + torch.einsum("bnthk,bnhkv->bnthv", qg, h_in)
    total = torch.exp(G[:, -1] - g_end).unsqueeze(-1).unsqueeze(-1)  # [B, N, H, 1, 1]
    s_ext = (s_chunk * total).sum(1)
    return o.reshape(b, t, h, vd), s_ext, G


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
              chunk: int, cp_group: dist.ProcessGroup) -> torch.Tensor:
    """q, k: [B, T, H, K]; v: [B, T, H, V] (this rank's contiguous tokens); g: [B, T, H]
    float32 log-decays. Output o_t = scale * S_t^T q_t over the whole sequence, [B, T, H, V]
    in q.dtype, where S carries over from earlier ranks.
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    b, t, h, kd = q.shape
    vd = v.shape[-1]
    scale = kd ** -0.5
    qf, kf, vf, gf = q.float() * scale, k.float(), v.float(), g.float()
    # Pass 1: this rank's own contribution to the state, assuming it starts from zero, and
    # the decay its chunk applies to any incoming state (the transition "matrix" is a scalar).
    G = torch.cumsum(gf, dim=1)
    s_ext = torch.einsum("bthk,bthv->bhkv", kf * torch.exp(G[:, -1:] - G).unsqueeze(-1), vf)
    decay = torch.exp(G[:, -1])  # [B, H]
    packed = torch.cat([s_ext.reshape(-1), decay.reshape(-1)])
    gathered = torch.empty(world * packed.numel(), dtype=packed.dtype, device=packed.device)
    dist.all_gather_into_tensor(gathered, packed, group=cp_group)
    gathered = gathered.view(world, -1)
    n_state = b * h * kd * vd
    # Merge the ranks before this one: S <- decay_j * S + S_ext_j.
    s_in = torch.zeros((b, h, kd, vd), dtype=torch.float32, device=q.device)
    for j in range(rank):
        s_j = gathered[j, :n_state].view(b, h, kd, vd)
        d_j = gathered[j, n_state:].view(b, h, 1, 1)
        s_in = d_j * s_in + s_j
    # Pass 2: local chunked linear attention started from the merged state.
    o, _, _ = _chunked_gla(qf, kf, vf, gf, chunk, initial=s_in if rank > 0 else None)
    return o.to(q.dtype)


def make_inputs(case: Case) -> dict:
    b, t, h, kd, vd = (case["batch"], case["tokens_per_rank"], case["heads"], case["key_dim"],
                       case["value_dim"])
    return {"q": case.randn(b, t, h, kd, stream="q"),
            "k": case.randn(b, t, h, kd, stream="k", std=kd ** -0.5),
            "v": case.randn(b, t, h, vd, stream="v"),
            "g": case.rand(b, t, h, stream="g", dtype=torch.float32, low=-0.02, high=-0.0005),
            "chunk": case["chunk"]}


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    b, t, h, kd, vd, c = (s["batch"], s["tokens_per_rank"], s["heads"], s["key_dim"],
                          s["value_dim"], s["chunk"])
    state = (b * h * kd * vd + b * h) * 4
    io = b * t * h * (2 * kd + 2 * vd) * s.itemsize + b * t * h * 4
    # Intra-chunk attention (2 T C (K+V)) plus state build and state read-out (4 T K V).
    flops = b * h * (2 * t * c * (kd + vd) + 4 * t * kd * vd)
    return Traffic(link_bytes=traffic.all_gather(p * state, p), hbm_bytes=io, flops=flops)


PROBLEM = Problem(
    id=707,
    slug="cp-linear-attention-state-merge",
    title="Context-parallel gated linear attention: all-gather chunk states and prefix-merge",
    description=(
        "Linear-attention and delta-rule layers (GLA, gated DeltaNet, KDA) carry a K x V state "
        "along the sequence, so a context-parallel rank cannot finish until it knows the state "
        "left by all earlier ranks. FLA's context parallelism has every rank compute the state "
        "its own tokens produce from a zero start plus the transition its chunk applies to an "
        "incoming state, all-gathers both, and chains the earlier ranks' contributions before "
        "running its local chunked kernel. With a scalar gate and no delta-rule correction the "
        "transition is a per-head decay, which is what this reference uses. The gathered states "
        "are about 1 MiB per rank; the point of a fast version is to hide that latency-bound "
        "exchange behind the intra-chunk work, which does not need the incoming state."
    ),
    categories=("context",),
    source=Source("flash-linear-attention",
                  "fla/ops/cp/chunk_delta_h.py: chunk_gated_delta_rule_fwd_h_pre_process",
                  "https://github.com/fla-org/flash-linear-attention"),
    collectives=("all_gather",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "tokens_per_rank": 16, "heads": 2, "key_dim": 8,
                     "value_dim": 8, "chunk": 4},
           "default": {"batch": 1, "tokens_per_rank": 8192, "heads": 16, "key_dim": 128,
                       "value_dim": 128, "chunk": 64}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
