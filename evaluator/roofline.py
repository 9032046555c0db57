"""Roofline time of one call: the slowest of moving its link bytes, its HBM bytes and its FLOPs
at the rates the hardware profile measured."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from problems.spec import Traffic, dtype_name

from .report import Roofline


def rates(profile: Mapping[str, Any], dtype: torch.dtype) -> tuple[float, float, float]:
    """(link bytes/s, HBM bytes/s, FLOP/s) from a profile's ``roofline`` block."""
    block = profile["roofline"]
    tflops = block["tflops"]
    # Elementwise and reduction math runs on the vector units; the bf16 matrix rate is the
    # ceiling only for GEMM-heavy problems, so use the dtype's own figure where it exists.
    flops_rate = tflops.get(dtype_name(dtype), tflops.get("float32")) * 1e12
    return block["link_gbps"] * 1e9, block["hbm_gbps"] * 1e9, flops_rate


def roofline(traffic: Traffic, profile: Mapping[str, Any], dtype: torch.dtype) -> Roofline:
    link_bw, hbm_bw, flops_rate = rates(profile, dtype)
    times = {
        "link": traffic.link_bytes / link_bw,
        "hbm": traffic.hbm_bytes / hbm_bw,
        "flops": traffic.flops / flops_rate if flops_rate else 0.0,
    }
    bound = max(times, key=times.__getitem__)
    return Roofline(
        time_ms=times[bound] * 1e3, bound=bound,  # type: ignore[typeddict-item]
        link_bytes=traffic.link_bytes, hbm_bytes=traffic.hbm_bytes, flops=traffic.flops,
        link_bandwidth_gbps=link_bw / 1e9, hbm_bandwidth_gbps=hbm_bw / 1e9,
        flops_rate_tflops=flops_rate / 1e12,
    )
