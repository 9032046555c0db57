"""CogVideoX VAE context-parallel causal Conv3d: previous rank's last frames as the time halo."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x: [B, C, T / p, H, W], the video latent split along time in rank order. Causal conv with
    # weight [Cout, C, kt, kh, kw]: frame t sees frames t - kt + 1 .. t. Rank r > 0 takes the
    # last kt - 1 frames of rank r - 1; rank 0 repeats its first frame kt - 1 times. Space is
    # zero-padded by kh // 2, kw // 2.
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    kt, kh, kw = weight.shape[-3:]
    ops, prev = [], None
    if rank < world - 1:
        nxt = dist.get_global_rank(group, rank + 1)
        ops.append(dist.P2POp(dist.isend, x[:, :, -(kt - 1):].contiguous(), nxt, group=group))
    if rank > 0:
        prv = dist.get_global_rank(group, rank - 1)
        prev = x.new_empty((x.shape[0], x.shape[1], kt - 1, x.shape[3], x.shape[4]))
        ops.append(dist.P2POp(dist.irecv, prev, prv, group=group))
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    if prev is None:
        prev = x[:, :, :1].expand(-1, -1, kt - 1, -1, -1)
    padded = torch.cat([prev, x], dim=2)
    padded = F.pad(padded, (kw // 2, kw // 2, kh // 2, kh // 2))
    return F.conv3d(padded, weight, bias)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    c, cout, k = case["channels"], case["out_channels"], case["kernel"]
    return {
        "x": case.randn(case["batch"], c, case["frames_per_rank"], case["h"], case["w"],
                        stream="x"),
        "weight": case.randn(cout, c, k, k, k, stream="weight", shared=True,
                             std=(c * k ** 3) ** -0.5),
        "bias": case.randn(cout, stream="bias", shared=True, std=0.1),
    }


def roofline(s: Setting) -> Traffic:
    b, c, cout, t, h, w, k = (s["batch"], s["channels"], s["out_channels"], s["frames_per_rank"],
                              s["h"], s["w"], s["kernel"])
    halo = b * c * (k - 1) * h * w * s.itemsize
    x_local = b * c * t * h * w * s.itemsize
    out = b * cout * t * h * w * s.itemsize
    hbm = x_local + halo + cout * c * k ** 3 * s.itemsize + out
    return Traffic(link_bytes=halo, hbm_bytes=hbm, flops=2 * b * cout * c * k ** 3 * t * h * w)


PROBLEM = Problem(
    id=1204,
    slug="cogvideo-cp-causal-conv3d",
    title="Context-parallel causal 3D convolution in a video VAE (CogVideoX)",
    description=(
        "Video VAEs (CogVideoX, and the similar causal VAEs of Open-Sora and MAGI-1) decode "
        "long, high-resolution clips by splitting the latent along time across GPUs. Every "
        "causal Conv3d needs the kt - 1 frames before its first local frame, so each rank "
        "passes its last frames to the next rank (the first rank replicates its first frame) "
        "and then convolves with spatial zero padding. The halo is whole frames of a large "
        "feature map, tens of MiB per layer, and it is on the critical path of every conv in "
        "the decoder; a fast kernel overlaps the transfer with the frames that do not need it "
        "and writes the halo straight into the consumer's padded input."
    ),
    categories=("spatial", "context"),
    source=Source("CogVideo", "sat/vae_modules/cp_enc_dec.py: _pass_from_previous_rank / "
                  "ContextParallelCausalConv3d.forward", "https://github.com/THUDM/CogVideo"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "channels": 4, "out_channels": 4, "frames_per_rank": 2,
                     "h": 6, "w": 6, "kernel": 3},
           "default": {"batch": 1, "channels": 128, "out_channels": 128, "frames_per_rank": 4,
                       "h": 240, "w": 360, "kernel": 3}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    tags=("inference",),
)
