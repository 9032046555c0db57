"""The full forward of ring attention (causal, contiguous chunks), all steps of the ring."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems.context_parallel.ring_forward import (
    causal_attention_flops, ring_attention, ring_link_bytes)
from problems.spec import Case, Problem, Setting, Traffic, Source, tolerances


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              cp_group: dist.ProcessGroup) -> torch.Tensor:
    # q, k, v [B, S/P, H, D]: this rank's contiguous chunk of the sequence. Returns the causal
    # attention output for its queries [B, S/P, H, D].
    return ring_attention(q, k, v, causal=True, cp_group=cp_group)


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    shape = (case["batch"], case["seq"] // case.world_size, case["heads"], case["head_dim"])
    return {name: case.randn(*shape, stream=name) for name in ("q", "k", "v")}


def roofline(s: Setting) -> Traffic:
    n, b, h, d = s.world_size, s["batch"], s["heads"], s["head_dim"]
    local = s["seq"] // n
    block = b * local * h * d * s.itemsize
    # The last rank of a causal ring attends to every chunk: its share of the work is the most.
    return Traffic(link_bytes=ring_link_bytes(b, local, h, d, s.itemsize, n),
                   hbm_bytes=4 * block + 2 * (n - 1) * block,
                   flops=causal_attention_flops(b, local, local * n, h, d, 1.0 - 0.5 / n))


PROBLEM = Problem(
    id=714,
    slug="ring-attention-forward",
    title="Ring attention forward, causal, all steps",
    description=(
        "Ring attention (ring-flash-attention's ring_flash_attn_func, TransformerEngine's P2P "
        "context parallelism) gives each context-parallel rank one contiguous chunk of a long "
        "sequence. For P steps every rank passes the K/V block it holds to the next rank with "
        "batch_isend_irecv while attending its queries to that block, and folds the block "
        "into a running output with the log-sum-exp merge; under causal masking blocks from "
        "later chunks are skipped and the diagonal block is masked. The transfer of each K/V "
        "block must hide behind the attention on the previous one, and with contiguous chunks "
        "the last rank does the most work, which is what the zigzag layout later fixes."
    ),
    categories=("context",),
    source=Source("ring-flash-attention", "ring_flash_attn/ring_flash_attn.py: "
                  "ring_flash_attn_forward", "https://github.com/zhuzilin/ring-flash-attention"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 1, "seq": 32, "heads": 2, "head_dim": 8},
           "default": {"batch": 1, "seq": 16384, "heads": 16, "head_dim": 128}},
    tolerances=tolerances(bfloat16=(2e-2, 2e-2), float32=(1e-5, 1e-5)),
    traffic=roofline,
    process_groups=lambda world: {"cp_group": [list(range(world))]},
    pkb_ids=(54,),
)
