"""Makani DistributedRealFFT2: 2D real FFT on an (h, w) pencil grid with mode truncation."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.groups import grid
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def _w_size(world_size: int) -> int:
    # w (longitude) groups hold consecutive ranks: 2 on 2 ranks, 2 on 4, 4 on 8.
    return 2 if world_size <= 4 else 4


def layout(world_size: int) -> GroupLayout:
    w_groups, h_groups = grid(world_size, _w_size(world_size))
    return {"w_group": w_groups, "h_group": h_groups}


def _transpose(x: torch.Tensor, split_dim: int, cat_dim: int, group) -> torch.Tensor:
    # distributed_transpose: chunk j of split_dim goes to group rank j; what arrives is
    # concatenated along cat_dim in rank order. Complex tensors travel as real pairs.
    p = dist.get_world_size(group)
    if p == 1:
        return x
    is_complex = x.is_complex()
    xr = torch.view_as_real(x) if is_complex else x
    split_dim, cat_dim = split_dim % x.dim(), cat_dim % x.dim()
    send = torch.stack(torch.chunk(xr, p, dim=split_dim), 0).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    out = torch.cat(recv.unbind(0), dim=cat_dim).contiguous()
    return torch.view_as_complex(out) if is_complex else out


def reference(x: torch.Tensor, *, h_group: dist.ProcessGroup,
              w_group: dist.ProcessGroup) -> torch.Tensor:
    # x: [B, C, nlat / ph, nlon / pw] real. Modes kept: lmax = nlat // 2 meridional,
    # mmax = nlon // 4 zonal. Output [B, C, lmax / ph, mmax / pw, 2]: l split over h, m over w.
    nlon = x.shape[-1] * dist.get_world_size(w_group)
    nlat = x.shape[-2] * dist.get_world_size(h_group)
    lmax, mmax = nlat // 2, nlon // 4
    # Make w local: channels split over w.
    xc = _transpose(x, 1, -1, w_group)
    xc = torch.fft.rfft(xc, n=nlon, dim=-1, norm="ortho")[..., :mmax].contiguous()
    # m split over w, channels local again; then channels split over h, h local.
    xc = _transpose(xc, -1, 1, w_group)
    xc = _transpose(xc, 1, -2, h_group)
    xc = torch.fft.fft(xc, n=nlat, dim=-2, norm="ortho")
    high, low = math.ceil(lmax / 2), math.floor(lmax / 2)
    xc = torch.cat([xc[..., :high, :], xc[..., nlat - low:, :]], dim=-2)
    # l split over h, channels local.
    xc = _transpose(xc, -2, 1, h_group)
    return torch.view_as_real(xc).contiguous()


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    pw = _w_size(case.world_size)
    ph = case.world_size // pw
    return {
        "x": case.randn(case["batch"], case["channels"], case["nlat"] // ph, case["nlon"] // pw,
                        stream="x"),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    pw = _w_size(n)
    ph = n // pw
    b, c, nlat, nlon = s["batch"], s["channels"], s["nlat"], s["nlon"]
    lmax, mmax = nlat // 2, nlon // 4
    x_local = b * c * nlat * nlon * 4 / n
    # Bytes per rank through each transpose (complex64 = 8 bytes per value).
    t1 = x_local  # real input
    t2 = b * c * nlat * mmax * 8 / n
    t3 = t2
    t4 = b * c * lmax * mmax * 8 / n
    link = (traffic.all_to_all(t1, pw) + traffic.all_to_all(t2, pw)
            + traffic.all_to_all(t3, ph) + traffic.all_to_all(t4, ph))
    hbm = x_local + 2 * (t2 + t3) + 2 * t4
    flops = (2.5 * b * c * nlat * nlon * math.log2(nlon)
             + 5 * b * c * nlat * mmax * math.log2(nlat)) / n
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=flops)


PROBLEM = Problem(
    id=1202,
    slug="makani-distributed-fft2-pencil",
    title="Pencil-decomposed 2D real FFT with mode truncation (Makani DistributedRealFFT2)",
    description=(
        "Makani (FourCastNet, SFNO) splits the latitude-longitude grid over a 2D grid of GPUs: "
        "h ranks share latitude bands and w ranks share longitude bands. Its 2D real FFT first "
        "transposes channels against longitude inside each w group, transforms and truncates "
        "to mmax zonal modes, transposes back, then does the same against latitude in the h "
        "group, keeping lmax meridional modes (the lowest positive and negative wavenumbers; "
        "here lmax = nlat / 2 and mmax = nlon / 4). Four all-to-alls "
        "per transform, each on a different sub-communicator, run inside every spectral block "
        "forward and backward; a fast kernel fuses truncation into the sends, overlaps the two "
        "group exchanges with the FFT batches and never materialises the discarded modes. "
        "Float32 only: torch.fft has no bfloat16 transforms and Makani runs FFTs in fp32."
    ),
    categories=("spatial",),
    source=Source("Makani", "makani/mpu/fft.py: DistributedRealFFT2.forward",
                  "https://github.com/NVIDIA/makani"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "channels": 8, "nlat": 16, "nlon": 32},
           "default": {"batch": 1, "channels": 128, "nlat": 720, "nlon": 1440}},
    tolerances=tolerances(float32=(1e-4, 1e-4)),
    dtypes=(torch.float32,),
    process_groups=layout,
    traffic=roofline,
    world_size_note="w groups of 2 ranks on 2 and 4 GPUs (h group of 1 on 2 GPUs), 4 on 8.",
)
