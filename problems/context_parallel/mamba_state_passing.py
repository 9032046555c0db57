"""Mamba-2 (SSD) under context parallelism: the final SSM state is passed rank to rank."""

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


def reference(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
              C: torch.Tensor, D: torch.Tensor, *, chunk: int,
              cp_group: dist.ProcessGroup) -> torch.Tensor:
    """Mamba-2 SSD scan over a context-parallel sequence, serial state passing.

    x: [b, T, H, P] (this rank's contiguous tokens); dt: [b, T, H] float32 (after softplus);
    A: [H] float32 (negative); B, C: [b, T, G, N] with H/G heads per group; D: [H] float32.
    h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t^T (state [N, P] per head), y_t = h_t^T C_t + D x_t.
    Rank r waits for rank r-1's final state, forwards its own final state to rank r+1, and
    returns y [b, T, H, P] in x.dtype.
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    bsz, t, h, p = x.shape
    n, groups = B.shape[-1], B.shape[2]
    rep = h // groups
    xf = x.float()
    k = B.float().repeat_interleave(rep, dim=2)  # [b, T, H, N]
    q = C.float().repeat_interleave(rep, dim=2)
    v = xf * dt.float().unsqueeze(-1)
    g = dt.float() * A.float()
    G = torch.cumsum(g, dim=1)
    # This rank's own state contribution (zero start) and its total decay.
    s_ext = torch.einsum("bthn,bthp->bhnp", k * torch.exp(G[:, -1:] - G).unsqueeze(-1), v)
    decay = torch.exp(G[:, -1]).view(bsz, h, 1, 1)
    init = None
    if rank > 0:
        init = torch.empty((bsz, h, n, p), dtype=torch.float32, device=x.device)
        dist.recv(init, src=dist.get_global_rank(cp_group, rank - 1), group=cp_group)
    if rank + 1 < world:
        final = s_ext if init is None else decay * init + s_ext
        dist.send(final.contiguous(), dst=dist.get_global_rank(cp_group, rank + 1), group=cp_group)
    y, _, _ = _chunked_gla(q, k, v, g, chunk, initial=init)
    y = y + xf * D.float().view(1, 1, h, 1)
    return y.to(x.dtype)


def make_inputs(case: Case) -> dict:
    b, t, h, p = case["batch"], case["tokens_per_rank"], case["heads"], case["head_dim"]
    g, n = case["groups"], case["state_dim"]
    return {
        "x": case.randn(b, t, h, p, stream="x"),
        "dt": case.rand(b, t, h, stream="dt", dtype=torch.float32, low=0.001, high=0.1),
        "A": case.rand(h, stream="A", shared=True, dtype=torch.float32, low=-8.0, high=-1.0),
        "B": case.randn(b, t, g, n, stream="B", std=n ** -0.5),
        "C": case.randn(b, t, g, n, stream="C"),
        "D": case.randn(h, stream="D", shared=True, dtype=torch.float32),
        "chunk": case["chunk"],
    }


def roofline(s: Setting) -> Traffic:
    b, t, h, p, g, n, c = (s["batch"], s["tokens_per_rank"], s["heads"], s["head_dim"],
                           s["groups"], s["state_dim"], s["chunk"])
    state = b * h * n * p * 4
    io = 2 * b * t * h * p * s.itemsize + 2 * b * t * g * n * s.itemsize + b * t * h * 4
    flops = b * h * (2 * t * c * (n + p) + 4 * t * n * p)
    # Each rank receives one state and sends one; the chain makes it P-1 hops of latency.
    return Traffic(link_bytes=traffic.send_recv(state), hbm_bytes=io, flops=flops)


PROBLEM = Problem(
    id=708,
    slug="cp-mamba2-serial-state-passing",
    title="Context-parallel Mamba-2 SSD with serial state passing (send/recv chain)",
    description=(
        "Mamba-2's SSD scan is parallel within a sequence shard except for the state that enters "
        "it. The context-parallel Mamba kernels in IBM's mamba fork replace the state-passing "
        "step with a chain: rank r receives the final SSM state of rank r-1, folds it into its "
        "own, and forwards the result to rank r+1 before computing its outputs. The state is "
        "a few MiB (heads x head_dim x d_state in float32), but the chain puts P-1 dependent "
        "hops on the critical path; a fast version computes the zero-start local state first, "
        "makes only the tiny affine update serial (or gathers all states at once), and "
        "overlaps the intra-chunk scan with the wait."
    ),
    categories=("context",),
    source=Source("mamba (IBM CP fork)",
                  "mamba_ssm/ops/triton/ssd_combined_cp.py: StatePassingSerialCP.fwd",
                  "https://github.com/garrett361/mamba"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "tokens_per_rank": 16, "heads": 4, "head_dim": 8, "groups": 2,
                     "state_dim": 8, "chunk": 4},
           "default": {"batch": 1, "tokens_per_rank": 8192, "heads": 64, "head_dim": 64,
                       "groups": 8, "state_dim": 128, "chunk": 64}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
