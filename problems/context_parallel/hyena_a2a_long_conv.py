"""Hyena long convolution under context parallelism: all-to-all to channel shards, FFT conv, back."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _zigzag_order(world: int) -> list[int]:
    """Global chunk ids in the order they sit after gathering ranks 0..P-1 (2 chunks each)."""
    return [c for j in range(world) for c in (j, 2 * world - 1 - j)]


def reference(x: torch.Tensor, h: torch.Tensor, bias: torch.Tensor, *,
              cp_group: dist.ProcessGroup) -> torch.Tensor:
    """x: [B, D, l] this rank's tokens in zigzag layout (global chunks r and 2P-1-r of l/2
    tokens), all D channels; h: [D/P, L] the long causal filter of this rank's channels
    (L = P l, float32); bias: [D] the per-channel skip weight (shared).

    split_to_full: all-to-all to [B, D/P, L] in sequence order; y = causal_conv(x, h) +
    bias * x computed with an FFT of size 2L in float32; full_to_split: back to [B, D, l].
    Returns y in x.dtype.
    """
    rank, world = dist.get_rank(cp_group), dist.get_world_size(cp_group)
    b, d, l = x.shape
    dl, seq = d // world, l * world
    half = l // 2
    # split_to_full: send channel block j to rank j; receive every rank's tokens of my channels.
    send = x.reshape(b, world, dl, l).transpose(0, 1).contiguous()  # [P, B, d, l]
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=cp_group)
    pieces = recv.permute(1, 2, 0, 3).reshape(b, dl, 2 * world, half)  # chunks in zigzag order
    order = _zigzag_order(world)
    inverse = [order.index(c) for c in range(2 * world)]
    full = pieces[:, :, inverse].reshape(b, dl, seq).float()
    n_fft = 2 * seq
    y = torch.fft.irfft(torch.fft.rfft(full, n=n_fft) * torch.fft.rfft(h.float(), n=n_fft),
                        n=n_fft)[..., :seq]
    y = y + full * bias[rank * dl:(rank + 1) * dl].float().view(1, dl, 1)
    y = y.to(x.dtype)
    # full_to_split: zigzag again, send each rank its two chunks of my channels.
    zig = y.reshape(b, dl, 2 * world, half)[:, :, order].reshape(b, dl, world, l)
    send2 = zig.permute(2, 0, 1, 3).contiguous()  # [P, B, d, l]
    recv2 = torch.empty_like(send2)
    dist.all_to_all_single(recv2, send2, group=cp_group)
    return recv2.transpose(0, 1).reshape(b, d, l)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    p = case.world_size
    b, d, seq = case["batch"], case["channels"], case["seq_len"]
    return {"x": case.randn(b, d, seq // p, stream="x"),
            "h": case.randn(d // p, seq, stream="h", dtype=torch.float32, std=seq ** -0.5),
            "bias": case.randn(d, stream="bias", shared=True, dtype=torch.float32)}


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    b, d, seq = s["batch"], s["channels"], s["seq_len"]
    local = b * d * (seq // p) * s.itemsize
    n_fft = 2 * seq
    # Three real FFTs of size 2L per local channel (~2.5 N log2 N each) and the product.
    ffts = 3 * 2.5 * n_fft * math.log2(n_fft) * b * (d // p)
    return Traffic(link_bytes=2 * traffic.all_to_all(local, p),
                   hbm_bytes=2 * local + (d // p) * seq * 4,
                   flops=ffts + 6 * b * (d // p) * n_fft)


PROBLEM = Problem(
    id=712,
    slug="hyena-cp-a2a-long-conv",
    title="Hyena long convolution with all-to-all context parallelism (Savanna, zigzag layout)",
    description=(
        "Hyena's long convolutions cover the whole sequence, so with the sequence split across "
        "context-parallel ranks Savanna (the Evo 2 training stack) switches layouts around them: "
        "an all-to-all turns zigzag sequence shards into channel shards over the full sequence, "
        "each rank runs an FFT causal convolution with its channels' filters plus the skip term, "
        "and a second all-to-all restores the zigzag sequence shards. Both all-to-alls move the "
        "whole activation (64-256 MiB per rank) around a compute step that is itself "
        "memory-bound; fast versions fuse the zigzag reordering into the transfers and pipeline "
        "channel groups so FFTs start as soon as their channels arrive."
    ),
    categories=("context",),
    source=Source("Savanna", "savanna/model/operators/hyena/distributed_a2a.py: "
                  "all_to_all_single_fn (split_to_full / full_to_split)",
                  "https://github.com/Zymrael/savanna"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "channels": 16, "seq_len": 64},
           "default": {"batch": 1, "channels": 4096, "seq_len": 65536}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
