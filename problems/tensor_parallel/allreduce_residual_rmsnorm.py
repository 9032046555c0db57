"""All-reduce fused with residual add and RMSNorm (TensorRT-LLM / FlashInfer allreduce fusion)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances

EPS = 1e-6


def reference(x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor, *,
              group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    # x: [tokens, hidden], this rank's partial output of the attention (or MLP) projection.
    # residual: [tokens, hidden], the residual stream, identical on every TP rank.
    reduced = x.clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM, group=group)
    residual_out = (reduced.float() + residual.float()).to(x.dtype)
    h = residual_out.float()
    norm = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS)
    norm_out = (norm * gamma.float()).to(x.dtype)
    # TensorRT-LLM's RESIDUAL_RMS_NORM returns [norm, residual].
    return norm_out, residual_out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tokens, hidden = case["tokens"], case["hidden"]
    return {
        "x": case.randn(tokens, hidden, stream="x"),
        "residual": case.randn(tokens, hidden, stream="res", shared=True),
        "gamma": case.rand(hidden, stream="gamma", shared=True, low=0.5, high=1.5),
    }


def roofline(s: Setting) -> Traffic:
    n, e = s.world_size, s.itemsize
    nbytes = s["tokens"] * s["hidden"] * e
    # Read x, residual, gamma; write norm_out and residual_out.
    hbm = 4 * nbytes + s["hidden"] * e
    return Traffic(link_bytes=traffic.all_reduce(nbytes, n), hbm_bytes=hbm,
                   flops=(n - 1 + 6) * s["tokens"] * s["hidden"])


PROBLEM = Problem(
    id=408,
    slug="tp-allreduce-residual-rmsnorm",
    title="Fused all-reduce + residual add + RMSNorm (decode)",
    description=(
        "In a tensor-parallel transformer at inference time, the all-reduce after the attention "
        "output projection is immediately followed by the residual add and the next layer's "
        "RMSNorm. TensorRT-LLM (AllReduce with AllReduceFusionOp.RESIDUAL_RMS_NORM) and FlashInfer "
        "(trtllm_allreduce_fusion, used by vLLM and SGLang) fuse the three into one kernel: each "
        "rank pulls the peers' partial sums over NVLink (one-shot for small batches, Lamport "
        "flags instead of barriers), adds the residual in fp32, writes the new residual stream "
        "and the normalised, gamma-scaled hidden state. Unfused, the sequence costs a collective "
        "plus two memory-bound kernels and two extra round trips through HBM for a payload of a "
        "few hundred KiB, so at decode batch sizes the fusion saves a large share of each layer's "
        "communication time."
    ),
    categories=("tensor",),
    source=Source(
        "TensorRT-LLM",
        "tensorrt_llm/_torch/distributed/ops.py: AllReduce.forward (AllReduceFusionOp.RESIDUAL_RMS_NORM); "
        "flashinfer/comm/trtllm_ar.py: trtllm_allreduce_fusion",
        "https://github.com/NVIDIA/TensorRT-LLM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 4, "hidden": 256},
           "default": {"tokens": 32, "hidden": 8192}},
    tolerances=tolerances(bfloat16=(3e-2, 3e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("inference", "latency"),
)
