"""Decode-time tensor-parallel all-reduce of a few tokens (vLLM / TensorRT-LLM custom all-reduce)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(x: torch.Tensor, *, group: dist.ProcessGroup) -> torch.Tensor:
    # x: [tokens, hidden], the partial output of a row-parallel projection for one decode step.
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    return {"x": case.randn(case["tokens"], case["hidden"], stream="x")}


def roofline(s: Setting) -> Traffic:
    nbytes = s["tokens"] * s["hidden"] * s.itemsize
    # Bandwidth bound on paper; in practice a few microseconds of latency dominate.
    return Traffic(link_bytes=traffic.all_reduce(nbytes, s.world_size), hbm_bytes=2 * nbytes,
                   flops=(s.world_size - 1) * s["tokens"] * s["hidden"])


PROBLEM = Problem(
    id=407,
    slug="tp-decode-allreduce",
    title="Decode-time tensor-parallel all-reduce (small messages)",
    description=(
        "During autoregressive decoding with tensor parallelism, every attention output "
        "projection and every MLP down projection ends with an all-reduce of [batch tokens, "
        "hidden] activations: for a batch of 1-64 sequences and hidden 8192 in bf16 that is "
        "16 KiB to 1 MiB, issued twice per layer, i.e. about 160 times per generated token for an "
        "80-layer model. At these sizes NCCL's ring setup, kernel launch and protocol overheads "
        "dominate, which is why vLLM (custom_all_reduce) and TensorRT-LLM (customAllReduce) ship "
        "their own kernels: buffers registered for peer access over NVLink, a one-shot algorithm "
        "where every rank reads all peers' inputs directly and sums them, flag-based barriers "
        "instead of a separate synchronisation, and CUDA-graph capture. Measured in microseconds."
    ),
    categories=("tensor", "collective"),
    source=Source(
        "vLLM",
        "vllm/distributed/device_communicators/custom_all_reduce.py: CustomAllreduce.custom_all_reduce "
        "(TensorRT-LLM cpp/tensorrt_llm/kernels/customAllReduceKernels.cu)",
        "https://github.com/vllm-project/vllm"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 4, "hidden": 256},
           "default": {"tokens": 16, "hidden": 8192}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    tags=("inference", "latency"),
)
