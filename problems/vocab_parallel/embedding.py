"""Vocab-parallel embedding lookup (Megatron VocabParallelEmbedding.forward)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems import traffic
from problems.spec import Case, Problem, Setting, Source, Traffic, tolerances


def reference(input_ids: torch.Tensor, weight: torch.Tensor, *,
              tp_group: dist.ProcessGroup) -> torch.Tensor:
    """Embedding rows of a table split by vocabulary across the group.

    weight [V/P, H] holds rows [rank*V/P, (rank+1)*V/P); input_ids [B, S] are global ids (same
    on every rank). Each rank looks up the ids it owns, writes zeros for the others and the
    partial results are summed. Returns [B, S, H] in the weight dtype (exact: one non-zero term).
    """
    rank = dist.get_rank(tp_group)
    part = weight.shape[0]
    start = rank * part
    outside = (input_ids < start) | (input_ids >= start + part)
    local = torch.where(outside, torch.zeros_like(input_ids), input_ids - start)
    out = F.embedding(local, weight)
    out = out.masked_fill(outside.unsqueeze(-1), 0.0)
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=tp_group)
    return out


def make_inputs(case: Case) -> dict:
    batch, seq, vocab, hidden = case["batch"], case["seq"], case["vocab"], case["hidden"]
    return {
        "input_ids": case.randint(0, vocab, batch, seq, stream="input_ids", shared=True),
        "weight": case.randn(vocab // case.world_size, hidden, stream="weight"),
    }


def roofline(s: Setting) -> Traffic:
    n, tokens, hidden = s.world_size, s["batch"] * s["seq"], s["hidden"]
    out_bytes = tokens * hidden * s.itemsize
    # Best known: every rank fetches the rows it does not own straight from their owners.
    link = traffic.all_gather(out_bytes, n)
    hbm = tokens * 8 + out_bytes / n + out_bytes
    return Traffic(link_bytes=link, hbm_bytes=hbm, flops=0.0)


PROBLEM = Problem(
    id=604,
    slug="vocab-parallel-embedding",
    title="Vocab-parallel embedding lookup (masked lookup + all-reduce)",
    description=(
        "Megatron's VocabParallelEmbedding splits the input embedding table by vocabulary over "
        "the tensor-parallel group. Every rank sees all token ids, looks up the ones in its "
        "range, zeroes the rows of ids owned by others and all-reduces the [B, S, H] result, "
        "which is the first collective of every forward pass and moves 2(P-1)/P of the "
        "activation size although each row has exactly one non-zero contributor. A fast "
        "version has each rank gather the rows it needs directly from the owners' tables (an "
        "all-gather-sized exchange with no arithmetic), or writes each looked-up row into all "
        "peers' outputs."
    ),
    categories=("vocab", "tensor"),
    source=Source("Megatron-LM",
                  "megatron/core/tensor_parallel/layers.py: VocabParallelEmbedding.forward",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("all_reduce",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"batch": 2, "seq": 8, "vocab": 256, "hidden": 32},
           "default": {"batch": 1, "seq": 8192, "vocab": 128256, "hidden": 4096}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    process_groups=lambda world_size: {"tp_group": [list(range(world_size))]},
)
