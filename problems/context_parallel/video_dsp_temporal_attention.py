"""Video DiT context parallelism: switch from frame shards to spatial shards for temporal attention."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _switch(x: torch.Tensor, scatter_dim: int, gather_dim: int, group) -> torch.Tensor:
    """All-to-all that splits scatter_dim into P pieces (piece j to rank j) and concatenates
    the received pieces along gather_dim in rank order."""
    p = dist.get_world_size(group)
    send = torch.stack(torch.tensor_split(x, p, dim=scatter_dim)).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(list(recv.unbind(0)), dim=gather_dim)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              cp_group: dist.ProcessGroup) -> torch.Tensor:
    """q, k, v: [B, T/P, S, H, D], rank r holding frames [r T/P, (r+1) T/P) of every spatial
    patch. Temporal attention (each spatial patch attends over all T frames, all heads,
    non-causal) needs whole frame columns, so the tensors switch to spatial shards
    [B, T, S/P, H, D], attend, and switch back. Returns [B, T/P, S, H, D] in q.dtype.
    """
    qs, ks, vs = (_switch(t, 2, 1, cp_group) for t in (q, k, v))  # [B, T, S/P, H, D]
    scores = torch.einsum("btshd,bushd->bshtu", qs.float(), ks.float()) * q.shape[-1] ** -0.5
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("bshtu,bushd->btshd", probs, vs.float()).to(q.dtype)
    return _switch(out, 1, 2, cp_group)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    p = case.world_size
    b, t, s, h, d = case["batch"], case["frames"], case["patches"], case["heads"], case["head_dim"]
    return {name: case.randn(b, t // p, s, h, d, stream=name) for name in ("q", "k", "v")}


def roofline(s: Setting) -> Traffic:
    p = s.world_size
    b, t, n, h, d = s["batch"], s["frames"], s["patches"], s["heads"], s["head_dim"]
    local = b * (t // p) * n * h * d * s.itemsize
    return Traffic(link_bytes=4 * traffic.all_to_all(local, p),
                   hbm_bytes=8 * local,
                   flops=4 * b * (n // p) * h * t * t * d)


PROBLEM = Problem(
    id=713,
    slug="video-dsp-temporal-attention",
    title="Video DiT context parallelism: frame-to-spatial all-to-all around temporal attention",
    description=(
        "Spatial-temporal video transformers (Open-Sora's STDiT) alternate attention within a "
        "frame and attention across frames. Dynamic sequence parallelism, as VideoSys runs "
        "Open-Sora, keeps tokens sharded by frame so spatial attention and MLPs are local, and "
        "before each temporal attention switches the shard dimension with an all-to-all so each "
        "rank holds all frames of S/P spatial patches, then switches back. Temporal attention "
        "over a few dozen frames is cheap, so the four all-to-alls of the q/k/v/out activations "
        "dominate the layer; a fast version fuses the strided re-layout into the transfers and "
        "overlaps the return trip with the attention of the remaining patches."
    ),
    categories=("context",),
    source=Source("VideoSys (Open-Sora)",
                  "videosys/models/transformers/open_sora_transformer_3d.py: STDiT3Block "
                  "dynamic_switch (videosys/core/comm.py: all_to_all_with_pad)",
                  "https://github.com/NUS-HPC-AI-Lab/VideoSys"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "frames": 8, "patches": 8, "heads": 2, "head_dim": 8},
           "default": {"batch": 1, "frames": 32, "patches": 3600, "heads": 16, "head_dim": 72}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=lambda world_size: {"cp_group": [list(range(world_size))]},
)
