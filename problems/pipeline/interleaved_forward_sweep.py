"""Forward pass of the interleaved (virtual pipeline) schedule with a linear layer per model
chunk: every stage holds several chunks, walks the virtual micro-batches in Megatron's order,
and hands each chunk's output to the next stage, wrapping from the last stage to the first
(Megatron-LM forward_backward_pipelining_with_interleaving, forward_only)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def pp_layout(world_size: int) -> GroupLayout:
    return {"pp_group": [list(range(world_size))]}


def chunk_and_microbatch(k: int, stages: int, chunks: int) -> tuple[int, int]:
    # Megatron's order: groups of `stages` micro-batches go through chunk 0, then chunk 1, ...
    group, within = divmod(k, stages * chunks)
    chunk, offset = divmod(within, stages)
    return chunk, group * stages + offset


def reference(microbatches: torch.Tensor, weights: torch.Tensor, *,
              pp_group: dist.ProcessGroup) -> torch.Tensor:
    stages = dist.get_world_size(pp_group)
    stage = dist.get_rank(pp_group)
    chunks, num_mb = weights.shape[0], microbatches.shape[0]
    next_rank = dist.get_global_rank(pp_group, (stage + 1) % stages)
    prev_rank = dist.get_global_rank(pp_group, (stage - 1) % stages)
    total = chunks * num_mb
    outputs = torch.empty(chunks, num_mb, *microbatches.shape[1:], dtype=microbatches.dtype,
                          device=microbatches.device)

    def comes_from_data(k: int) -> bool:
        return stage == 0 and chunk_and_microbatch(k, stages, chunks)[0] == 0

    # Warm-up receive of the first input (stage 0 reads micro-batch 0 from the data loader).
    if comes_from_data(0):
        x = microbatches[0]
    else:
        x = torch.empty_like(microbatches[0])
        for req in dist.batch_isend_irecv([dist.P2POp(dist.irecv, x, prev_rank, group=pp_group)]):
            req.wait()
    for k in range(total):
        chunk, mb = chunk_and_microbatch(k, stages, chunks)
        y = x @ weights[chunk].t()
        outputs[chunk, mb] = y
        # send_forward_recv_forward: the output goes on (except the model's final chunk on the
        # last stage), and the input of the next virtual micro-batch arrives in the same batch.
        ops = []
        if not (stage == stages - 1 and chunk == chunks - 1):
            ops.append(dist.P2POp(dist.isend, y, next_rank, group=pp_group))
        x_next = None
        if k + 1 < total and not comes_from_data(k + 1):
            x_next = torch.empty_like(y)
            ops.append(dist.P2POp(dist.irecv, x_next, prev_rank, group=pp_group))
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        if k + 1 < total and x_next is None:
            x_next = microbatches[chunk_and_microbatch(k + 1, stages, chunks)[1]]
        x = x_next
    return outputs


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tokens, hidden = case["tokens"], case["hidden"]
    return {
        # The data loader's micro-batches (embedding outputs): read only by stage 0.
        "microbatches": case.randn(case["microbatches"], tokens, hidden, stream="data",
                                   shared=True),
        # This stage's model chunks, one linear layer each.
        "weights": case.randn(case["chunks"], hidden, hidden, stream="w", std=hidden ** -0.5),
    }


def roofline(s: Setting) -> Traffic:
    tokens, hidden, v, m = s["tokens"], s["hidden"], s["chunks"], s["microbatches"]
    act = tokens * hidden * s.itemsize
    # A middle stage receives and sends every one of its v * m chunk activations.
    return Traffic(link_bytes=v * m * traffic.send_recv(act),
                   hbm_bytes=2 * v * m * act + v * hidden * hidden * s.itemsize,
                   flops=2 * v * m * tokens * hidden * hidden)


PROBLEM = Problem(
    id=803,
    slug="pp-interleaved-forward-sweep",
    title="Interleaved virtual-pipeline forward sweep with wrap-around hand-off",
    description=(
        "With virtual pipeline parallelism each of the P stages holds V model chunks (stage s "
        "holds layers s, s+P, s+2P, ... of the model). Megatron-LM's "
        "forward_backward_pipelining_with_interleaving walks V x M virtual micro-batches in a "
        "fixed order (P micro-batches through chunk 0, the same P through chunk 1, ..., then "
        "the next P), and after each chunk's forward calls send_forward_recv_forward: the output "
        "goes to stage s+1 and the next virtual micro-batch's input arrives from stage s-1 in "
        "one batched p2p call. Rank order: stage s is rank s and the stages form a ring: the "
        "last stage's chunk c output becomes the first stage's chunk c+1 input; stage 0 reads "
        "chunk-0 inputs from the data loader (the shared microbatches input) and the last "
        "stage's final chunk output leaves the pipeline. Each chunk here is one linear layer; "
        "each rank returns every chunk output it computed, shaped (V, M, tokens, hidden). The "
        "hand-offs sit between every pair of chunk GEMMs; a fast kernel streams each output to "
        "the next GPU as it is produced and starts the next GEMM as soon as its input lands."
    ),
    categories=("pipeline",),
    source=Source("Megatron-LM",
                  "megatron/core/pipeline_parallel/schedules.py: forward_backward_pipelining_with_interleaving",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 8, "hidden": 32, "chunks": 2, "microbatches": 8},
           "default": {"tokens": 2048, "hidden": 4096, "chunks": 2, "microbatches": 8}},
    tolerances=tolerances(bfloat16=(5e-2, 5e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=pp_layout,
)
