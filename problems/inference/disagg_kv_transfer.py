"""Disaggregated serving: prefill ranks push a request's paged KV cache into decode ranks' pools."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(k_buffer: torch.Tensor, v_buffer: torch.Tensor, page_ids: torch.Tensor, *,
              group: dist.ProcessGroup):
    """The first half of the ranks are prefill workers, the second half decode workers; prefill
    rank i serves decode rank i + P/2 (same TP slot of the KV heads).

    k_buffer, v_buffer: [layers, num_pages, page_size, kv_heads, head_dim], every rank's KV
    pool. page_ids: [n_pages] int64, on a prefill rank the pages holding the finished
    request's context, on a decode rank the pages allocated to receive it (same order).
    Prefill ranks send the pages of every layer; decode ranks write them into their pool in
    place. Every rank returns (k_buffer, v_buffer).
    """
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    half = world // 2
    if rank < half:
        peer = dist.get_global_rank(group, rank + half)
        k_pages = k_buffer.index_select(1, page_ids).contiguous()
        v_pages = v_buffer.index_select(1, page_ids).contiguous()
        ops = [dist.P2POp(dist.isend, k_pages, peer, group=group),
               dist.P2POp(dist.isend, v_pages, peer, group=group)]
    else:
        peer = dist.get_global_rank(group, rank - half)
        shape = (k_buffer.shape[0], page_ids.numel()) + tuple(k_buffer.shape[2:])
        k_pages = torch.empty(shape, dtype=k_buffer.dtype, device=k_buffer.device)
        v_pages = torch.empty_like(k_pages)
        ops = [dist.P2POp(dist.irecv, k_pages, peer, group=group),
               dist.P2POp(dist.irecv, v_pages, peer, group=group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    if rank >= half:
        k_buffer.index_copy_(1, page_ids, k_pages)
        v_buffer.index_copy_(1, page_ids, v_pages)
    return k_buffer, v_buffer


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    layers, pages, page, hkv, d = (case["layers"], case["num_pages"], case["page_size"],
                                   case["kv_heads"], case["head_dim"])
    shape = (layers, pages, page, hkv, d)
    return {"k_buffer": case.randn(*shape, stream="k"),
            "v_buffer": case.randn(*shape, stream="v"),
            "page_ids": case.randperm(pages, stream="pages")[:case["request_pages"]]}


def roofline(s: Setting) -> Traffic:
    layers, page, hkv, d, n = (s["layers"], s["page_size"], s["kv_heads"], s["head_dim"],
                               s["request_pages"])
    moved = 2 * layers * n * page * hkv * d * s.itemsize
    # Read the pages on the sender, write them on the receiver.
    return Traffic(link_bytes=traffic.send_recv(moved), hbm_bytes=moved, flops=0.0)


PROBLEM = Problem(
    id=901,
    slug="disagg-kv-cache-transfer",
    title="Disaggregated prefill/decode: paged KV-cache transfer to the decode pool",
    description=(
        "In prefill/decode disaggregation (SGLang with Mooncake or NIXL, vLLM KV connectors, "
        "Dynamo) a prefill worker computes a request's KV cache and ships it to a decode worker, "
        "which has already allocated pages for it in its own pool. SGLang's send_kvcache walks "
        "every layer and copies each run of source pages to the matching destination pages. "
        "Here the first half of the ranks prefill and each sends a 4K-token request's pages "
        "(512 MiB over 32 layers) to its decode partner, which scatters them into its pool. The "
        "transfer sits between the prompt and the first decoded token; a fast version skips the "
        "pack/unpack copies and writes pages straight into the peer's pool, layer by layer as "
        "soon as each is ready."
    ),
    categories=("pipeline",),
    source=Source("SGLang", "python/sglang/srt/disaggregation/mooncake/conn.py: "
                  "MooncakeKVManager.send_kvcache", "https://github.com/sgl-project/sglang"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"layers": 2, "num_pages": 8, "page_size": 4, "kv_heads": 2, "head_dim": 8,
                     "request_pages": 5},
           "default": {"layers": 32, "num_pages": 512, "page_size": 16, "kv_heads": 8,
                       "head_dim": 128, "request_pages": 256}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    may_overwrite=("k_buffer", "v_buffer"),
    tags=("inference",),
)
