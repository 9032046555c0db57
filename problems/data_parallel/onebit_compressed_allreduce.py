"""DeepSpeed 1-bit Adam/LAMB compressed all-reduce: sign + scale with worker and server error feedback."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

_BIT_WEIGHTS = (128, 64, 32, 16, 8, 4, 2, 1)  # most significant bit first, as numpy/cupy packbits


def _scale(x: torch.Tensor) -> torch.Tensor:
    # ||x|| / sqrt(numel). Accumulated in fp64 and rounded once to fp32 so that every correct
    # implementation gets the same scale bit for bit (signs downstream depend on it).
    return (x.double().square().sum().sqrt() / math.sqrt(x.numel())).float().reshape(1)


def _signs(x: torch.Tensor) -> torch.Tensor:
    return x >= 0  # DeepSpeed's sign().add_(1).bool(): zero counts as positive


def _pack(bits: torch.Tensor) -> torch.Tensor:
    w = torch.tensor(_BIT_WEIGHTS, dtype=torch.uint8, device=bits.device)
    return (bits.view(-1, 8).to(torch.uint8) * w).sum(dim=1, dtype=torch.uint8)


def _unpack_pm1(packed: torch.Tensor) -> torch.Tensor:
    w = torch.tensor(_BIT_WEIGHTS, dtype=torch.uint8, device=packed.device)
    bits = (packed.unsqueeze(-1) & w) != 0
    return bits.reshape(*packed.shape[:-1], -1).float().mul_(2.0).sub_(1.0)  # {0,1} -> {-1,+1}


def reference(buffer_m: torch.Tensor, worker_error: torch.Tensor, server_error: torch.Tensor,
              *, group: dist.ProcessGroup):
    world = dist.get_world_size(group)
    n = buffer_m.numel()
    # Worker side: error-compensate, compress to sign * one scale, keep the residual.
    compensated = buffer_m + worker_error
    w_scale = _scale(compensated)
    w_sign = _signs(compensated)
    new_worker_error = compensated - w_scale * (w_sign.float() * 2 - 1)
    # Phase 1: all-to-all of packed sign chunks (chunk r goes to rank r), all-gather of scales.
    send = _pack(w_sign).view(world, n // (8 * world))
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    scales = torch.empty(world, dtype=torch.float32, device=buffer_m.device)
    dist.all_gather_into_tensor(scales, w_scale, group=group)
    # Server side for this rank's chunk: average the decompressed chunks in source-rank order.
    signs = _unpack_pm1(recv)  # (world, n // world)
    server_m = signs[0] * (scales[0] / world)
    for src in range(1, world):
        server_m = server_m + signs[src] * (scales[src] / world)
    server_m = server_m + server_error
    s_scale = _scale(server_m)
    s_sign = _signs(server_m)
    new_server_error = server_m - s_scale * (s_sign.float() * 2 - 1)
    # Phase 2: all-gather every server chunk's packed signs and scale, decompress the result.
    all_signs = torch.empty(n // 8, dtype=torch.uint8, device=buffer_m.device)
    dist.all_gather_into_tensor(all_signs, _pack(s_sign), group=group)
    all_signs = all_signs.view(world, n // (8 * world))
    all_scales = torch.empty(world, dtype=torch.float32, device=buffer_m.device)
    dist.all_gather_into_tensor(all_scales, s_scale, group=group)
    result = (_unpack_pm1(all_signs) * all_scales.unsqueeze(1)).reshape(n)
    return result, new_worker_error, new_server_error


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    n = case["numel"]
    f32 = torch.float32
    return {
        "buffer_m": case.randn(n, stream="m", dtype=f32, std=1e-2),
        "worker_error": case.randn(n, stream="we", dtype=f32, std=3e-3),
        "server_error": case.randn(n // case.world_size, stream="se", dtype=f32, std=3e-3),
    }


def roofline(s: Setting) -> Traffic:
    n, world = s["numel"], s.world_size
    # One bit per element in each phase (plus a few scales).
    link = traffic.all_to_all(n / 8, world) + traffic.all_gather(n / 8, world) + 8 * world
    hbm = 4 * 4 * n + 2 * 4 * n / world  # m, worker error in; worker error, result out; server error
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=8 * n + 2 * world * n / world)


PROBLEM = Problem(
    id=204,
    slug="onebit-compressed-allreduce",
    title="1-bit compressed all-reduce with error feedback (1-bit Adam)",
    description=(
        "After its warm-up, DeepSpeed's 1-bit Adam/LAMB stops all-reducing fp32 momentum and "
        "instead runs a two-phase compressed all-reduce: each worker adds its carried error, "
        "sends only the signs (packed 8 per byte) plus one scale ||x||/sqrt(n), and keeps the "
        "residual as its new worker error; through an all-to-all each rank receives one chunk "
        "from every worker, averages the decompressed chunks, compresses that again with its own "
        "server error, and an all-gather of signs and scales rebuilds the averaged momentum "
        "everywhere. Traffic drops 32x but the reference spends many HBM passes on packing and "
        "unpacking bits around two small exchanges; a fast kernel fuses compensation, norm, "
        "sign packing and the sends. Bit-exact conventions: zero counts as positive, bits are "
        "packed most-significant first, scales are accumulated in fp64 then rounded to fp32, "
        "and the server average sums the sources in rank order. fp32 as in 1-bit Adam's state."
    ),
    categories=("data",),
    source=Source("DeepSpeed", "deepspeed/runtime/comm/nccl.py: NcclBackend.compressed_allreduce",
                  "https://github.com/deepspeedai/DeepSpeed"),
    collectives=("all_to_all", "all_gather"),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"numel": 8 * 8 * 64}, "default": {"numel": 64 * 2**20}},
    dtypes=(torch.float32,),
    tolerances=tolerances(float32=(1e-6, 1e-5)),
    traffic=roofline,
    tags=("backward",),
)
