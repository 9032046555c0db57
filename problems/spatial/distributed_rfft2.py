"""PhysicsNeMo DistributedRFFT2: slab-decomposed 2D real FFT with an all-to-all transpose."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # x: [B, C, H, W / p] real, split along W. FFT along H (local), all-to-all transpose so that
    # H is split and W local, FFT along W, keep the W // 2 + 1 non-negative frequencies.
    # Output: [B, C, H / p, W // 2 + 1, 2] (complex as real/imag pairs), split along H.
    world = dist.get_world_size(group)
    b, c, h, w_local = x.shape
    # torch.fft has no bfloat16: a bfloat16 field is transformed in float32 (as PhysicsNeMo's
    # callers cast it), so the output is float32 pairs for either input dtype.
    x1 = torch.fft.fft(x.float(), dim=-2, norm="ortho")
    # Transpose: chunk j of H goes to rank j; received W-chunks are concatenated in rank order.
    send = torch.view_as_real(x1).reshape(b, c, world, h // world, w_local, 2)
    send = send.permute(2, 0, 1, 3, 4, 5).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    x1t = recv.permute(1, 2, 3, 0, 4, 5).reshape(b, c, h // world, world * w_local, 2)
    x2 = torch.fft.fft(torch.view_as_complex(x1t.contiguous()), dim=-1, norm="ortho")
    return torch.view_as_real(x2[..., : (world * w_local) // 2 + 1]).contiguous()


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"x": case.randn(case["batch"], case["channels"], case["h"],
                            case["w"] // case.world_size, stream="x")}


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    b, c, h, w = s["batch"], s["channels"], s["h"], s["w"]
    x_bytes = b * c * h * w * s.itemsize // n
    inter = 2 * x_bytes  # complex64 after the first FFT
    out = b * c * (h // n) * (w // 2 + 1) * 8
    # The transposed complex slab crosses the links; FFTs read and write each buffer once.
    flops = 5 * b * c * h * w * math.log2(h * w) / n
    return Traffic(link_bytes=traffic.all_to_all(inter, n),
                   hbm_bytes=x_bytes + 4 * inter + out, flops=flops)


PROBLEM = Problem(
    id=1201,
    slug="physicsnemo-distributed-rfft2",
    title="Slab-decomposed 2D real FFT (PhysicsNeMo DistributedRFFT2)",
    description=(
        "Fourier neural operators and AFNO weather models on large grids keep the field split "
        "across GPUs by one spatial axis. PhysicsNeMo's distributed 2D FFT transforms the local "
        "axis first, transposes the whole complex slab with an all-to-all so the other axis "
        "becomes local, transforms it, and keeps the non-negative frequencies. The transpose "
        "moves the full complex field (twice the real input) every spectral layer, forward and "
        "backward, and sits between two compute phases that cannot start early; a fast "
        "implementation pipelines per-destination chunks of the first FFT into the exchange and "
        "starts the second FFT as chunks land. A bfloat16 field (ParallelKernelBench's default) is "
        "transformed in float32: torch.fft has no bfloat16 transforms and the model runs its "
        "spectral layers in fp32 outside autocast."
    ),
    categories=("spatial",),
    source=Source("PhysicsNeMo", "physicsnemo/distributed/fft.py: DistributedRFFT2.forward",
                  "https://github.com/NVIDIA/physicsnemo"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "channels": 2, "h": 16, "w": 16},
           "default": {"batch": 2, "channels": 32, "h": 720, "w": 1440}},
    tolerances=tolerances(float32=(1e-4, 1e-4), bfloat16=(1e-4, 1e-4)),
    dtypes=(torch.float32, torch.bfloat16),
    traffic=roofline,
    pkb_ids=(59,),
)
