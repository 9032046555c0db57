"""The measured-hardware part of a prompt: the profile as numbers a model can plan with (link
matrix, peer bandwidths, NCCL bus bandwidth by message size), the roofline of this problem at
this size term by term, the backends the host offers, and one worked example per backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from . import presenters
from .models import Hardware

# One committed kernel per backend, and what is on record about it. torch has none yet (the
# committed kernels are CUDA or Triton).
EXAMPLES = {
    "cuda": ("solutions/symm_mem/all_gather_push.py",
             "It passes on 4 x H200 (docs/gpu-h200.md: 0.891x against NCCL at 64 MiB)."),
    "triton": ("solutions/triton/all_reduce_triton.py",
               "No GPU result is on record for it yet: read it for the API, not for speed."),
}


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def profile_lines(hw: Hardware) -> list[str]:
    p = hw.profile
    lines = []
    if p.get("measured_at"):
        lines.append(f"Measured {p['measured_at'][:10]} by `{p.get('command', 'pkb probe')}`.")
    links = presenters.link_matrix(p)
    if links:
        lines.append("Link matrix (nvidia-smi topo; NV<n> = n NVLink links):")
        lines.append("    " + " " * 6 + "  ".join(f"{c:>5}" for c in links["cols"]))
        lines += [f"    {r['name']:<5} " + "  ".join(f"{c:>5}" for c in r["cells"]) for r in links["rows"]]
    heat = presenters.bandwidth_heatmap(p)
    if heat:
        lines.append("Peer copy bandwidth, GB/s, one ordered pair at a time (row: from, column: to):")
        lines += ["    " + "  ".join("   --" if v is None else f"{v:5.0f}" for v in row) for row in heat["z"]]
        if heat.get("concurrent"):
            lines.append(f"Every pair at once: {heat['concurrent']} GB/s of egress per GPU.")
    curves = presenters.collective_curves(p)
    if curves:
        sizes = sorted({x for s in curves["series"].values() for x in s["x"]})
        lines.append(f"{curves['backend']} bus bandwidth, GB/s, {curves['dtype']}, "
                     f"{curves['world_size']} ranks, by message size:")
        lines.append("    " + f"{'':<16}" + "".join(f"{_size(b):>10}" for b in sizes))
        for op, s in curves["series"].items():
            by = dict(zip(s["x"], s["y"]))
            lines.append("    " + f"{op:<16}" + "".join(
                f"{by[b]:>10.3g}" if by.get(b) is not None else f"{'':>10}" for b in sizes))
    return lines


def roofline_lines(traffic: dict[str, float] | None, hw: Hardware, dtype: str) -> list[str]:
    """The roofline's three terms, so the model sees which one binds and by how much."""
    block = hw.profile.get("roofline") or {}
    if not traffic or "error" in traffic or not block.get("link_gbps"):
        return []
    tflops = (block.get("tflops") or {})
    rate = tflops.get(dtype) or tflops.get("float32")
    terms = [("link", traffic["link_bytes"], f"{block['link_gbps']} GB/s per GPU per direction",
              traffic["link_bytes"] / (float(block["link_gbps"]) * 1e9)),
             ("HBM", traffic["hbm_bytes"], f"{block.get('hbm_gbps')} GB/s",
              traffic["hbm_bytes"] / (float(block.get("hbm_gbps") or 0) * 1e9) if block.get("hbm_gbps") else 0.0),
             ("compute", traffic["flops"], f"{rate} TFLOP/s {dtype}",
              traffic["flops"] / (float(rate) * 1e12) if rate else 0.0)]
    lines = [f"- {name}: {amount:.4g} {'FLOPs' if name == 'compute' else 'bytes'} at {speed} -> "
             f"{seconds * 1e3:.4f} ms" for name, amount, speed, seconds in terms]
    bound = max(terms, key=lambda t: t[3])
    lines.append(f"- roofline: {bound[3] * 1e3:.4f} ms, {bound[0]}-bound (the slowest term; a kernel "
                 "at the roofline moves exactly this with nothing else in the way)")
    return lines


def backends(hw: Hardware) -> list[str]:
    software = hw.profile.get("software") or {}
    if hw.kind != "gpu":
        torch = f"torch {software['torch']}" if software.get("torch") else "torch"
        return [f"{torch} over gloo on CPU processes: no CUDA, no Triton, "
                "no symmetric memory (a smoke-test host; its timings are not performance)."]
    return [
        f"CUDA {software.get('cuda', '')} C++ through the evaluator's helper: NVRTC "
        "(`evaluator.cuda.compile_kernels`, well under a second) or torch's load_inline "
        "(`evaluator.cuda.load_extension`, tens of seconds cold); built once per evaluation for "
        "all ranks.",
        f"Triton (the version torch {software.get('torch', '')} ships with), over symmetric-memory "
        "buffers.",
        "Symmetric memory: torch.distributed._symmetric_memory (empty, rendezvous, buffer_ptrs, "
        "barrier); peers' buffers are directly addressable over NVLink.",
        f"NCCL {software.get('nccl', '')} through torch.distributed (what the reference uses).",
        "NVLink multicast (multimem, multicast pointers, NVLS) is OFF on these hosts.",
    ]


def worked_example(backend: str) -> dict[str, Any] | None:
    if backend not in EXAMPLES:
        return None
    rel, record = EXAMPLES[backend]
    try:
        return {"path": rel, "backend": backend, "record": record,
                "source": (Path(settings.BASE_DIR) / rel).read_text()}
    except OSError:
        return None
