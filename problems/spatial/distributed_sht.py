"""torch-harmonics DistributedRealSHT: spherical harmonic transform with longitude split."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def _transpose(x: torch.Tensor, split_dim: int, cat_dim: int, group) -> torch.Tensor:
    # distributed_transpose_azimuth: chunk j of split_dim to rank j, concatenate what arrives
    # along cat_dim in rank order (complex values travel as real pairs).
    p = dist.get_world_size(group)
    is_complex = x.is_complex()
    xr = torch.view_as_real(x) if is_complex else x
    split_dim, cat_dim = split_dim % x.dim(), cat_dim % x.dim()
    send = torch.stack(torch.chunk(xr, p, dim=split_dim), 0).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    out = torch.cat(recv.unbind(0), dim=cat_dim).contiguous()
    return torch.view_as_complex(out) if is_complex else out


def reference(x: torch.Tensor, weights: torch.Tensor, *,
              group: dist.ProcessGroup) -> torch.Tensor:
    # x: [B, C, nlat, nlon / p] real, longitude split over the azimuth group (polar group of 1).
    # weights: [mmax / p, lmax, nlat], this rank's orders m of the Legendre polynomials already
    # multiplied by the quadrature weights. Output: [B, C, lmax, mmax / p, 2].
    p = dist.get_world_size(group)
    nlon = x.shape[-1] * p
    m_local, lmax, nlat = weights.shape
    mmax = m_local * p
    # Channels split, longitude local.
    xc = _transpose(x, 1, -1, group)
    xc = 2.0 * torch.pi * torch.fft.rfft(xc, n=nlon, dim=-1, norm="forward")
    xc = xc[..., :mmax].contiguous()
    # Orders m split, channels local.
    xc = _transpose(xc, -1, 1, group)
    xr = torch.view_as_real(xc)
    # Legendre quadrature: contract latitude k for each order m.
    re = torch.einsum("...km,mlk->...lm", xr[..., 0], weights)
    im = torch.einsum("...km,mlk->...lm", xr[..., 1], weights)
    return torch.stack([re, im], dim=-1)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    p, r = case.world_size, case.rank
    mmax, lmax, nlat = case["mmax"], case["lmax"], case["nlat"]
    m_local = mmax // p
    # The precomputed weights of the whole transform, identical everywhere; each rank keeps its
    # slice of orders, as the module's constructor does.
    full = case.randn(mmax, lmax, nlat, stream="weights", shared=True, std=nlat ** -0.5)
    return {
        "x": case.randn(case["batch"], case["channels"], nlat, case["nlon"] // p, stream="x"),
        "weights": full[r * m_local:(r + 1) * m_local].contiguous(),
    }


def roofline(s: Setting) -> Traffic:
    n = s.world_size
    b, c, nlat, nlon, lmax, mmax = (s["batch"], s["channels"], s["nlat"], s["nlon"], s["lmax"],
                                    s["mmax"])
    x_local = b * c * nlat * nlon * 4 / n
    spec = b * c * nlat * mmax * 8 / n  # complex64 modes after truncation
    link = traffic.all_to_all(x_local, n) + traffic.all_to_all(spec, n)
    w_bytes = (mmax // n) * lmax * nlat * 4
    out = b * c * lmax * (mmax // n) * 8
    hbm = 2 * x_local + 2 * spec + w_bytes + out
    flops = (2.5 * b * c * nlat * nlon * math.log2(nlon) / n
             + 2 * 2 * b * c * (mmax // n) * lmax * nlat)
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=flops)


PROBLEM = Problem(
    id=1205,
    slug="torch-harmonics-distributed-sht",
    title="Distributed spherical harmonic transform (torch-harmonics DistributedRealSHT)",
    description=(
        "Spherical Fourier neural operators (SFNO in Makani and torch-harmonics) transform the "
        "latitude-longitude field into spherical harmonic coefficients every block. With the "
        "grid split over longitude, the transform transposes channels against longitude with an "
        "all-to-all, takes the real FFT along each latitude ring and truncates to mmax orders, "
        "transposes again so that orders are split and channels local, and contracts latitude "
        "with the per-order Legendre quadrature weights (a batched GEMM per order). The two "
        "transposes carry the whole field and its spectrum each layer; a fast version overlaps "
        "them with the FFT batches and the Legendre GEMMs and fuses truncation into the send. "
        "Float32 only: torch.fft has no bfloat16 transforms and the SHT runs in fp32 for accuracy."
    ),
    categories=("spatial",),
    source=Source("torch-harmonics",
                  "torch_harmonics/distributed/distributed_sht.py: DistributedRealSHT.forward",
                  "https://github.com/NVIDIA/torch-harmonics"),
    collectives=("all_to_all",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "channels": 8, "nlat": 8, "nlon": 16, "lmax": 8, "mmax": 8},
           "default": {"batch": 2, "channels": 64, "nlat": 360, "nlon": 720, "lmax": 360,
                       "mmax": 360}},
    tolerances=tolerances(float32=(1e-4, 1e-4)),
    dtypes=(torch.float32,),
    traffic=roofline,
)
