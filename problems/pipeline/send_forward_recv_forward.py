"""Pipeline-parallel activation hand-off: every stage sends its output activation to the next
stage and receives the previous stage's in one batched p2p call (Megatron-LM
p2p_communication.send_forward_recv_forward, as used by the interleaved schedule)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def pp_layout(world_size: int) -> GroupLayout:
    # Stage s is rank s of the pipeline group.
    return {"pp_group": [list(range(world_size))]}


def reference(output_tensor: torch.Tensor, *, pp_group: dist.ProcessGroup) -> torch.Tensor:
    stages = dist.get_world_size(pp_group)
    stage = dist.get_rank(pp_group)
    # Megatron's next/previous pipeline ranks wrap around: with virtual pipeline stages the
    # last stage's chunk k feeds the first stage's chunk k + 1, so the exchange is a ring.
    next_rank = dist.get_global_rank(pp_group, (stage + 1) % stages)
    prev_rank = dist.get_global_rank(pp_group, (stage - 1) % stages)
    input_tensor = torch.empty_like(output_tensor)
    ops = [dist.P2POp(dist.irecv, input_tensor, prev_rank, group=pp_group),
           dist.P2POp(dist.isend, output_tensor, next_rank, group=pp_group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return input_tensor


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    # Megatron's p2p tensor shape: (sequence, micro-batch, hidden).
    return {"output_tensor": case.randn(case["seq"], case["micro_batch"], case["hidden"],
                                        stream="act")}


def roofline(s: Setting) -> Traffic:
    nbytes = s["seq"] * s["micro_batch"] * s["hidden"] * s.itemsize
    return Traffic(link_bytes=traffic.send_recv(nbytes), hbm_bytes=2 * nbytes)


PROBLEM = Problem(
    id=801,
    slug="pp-send-forward-recv-forward",
    title="Pipeline send_forward_recv_forward (ring of stages)",
    description=(
        "Between pipeline stages Megatron-LM moves activations with batched point-to-point "
        "operations: send_forward_recv_forward posts, in one batch_isend_irecv, the send of this "
        "stage's output (sequence x micro-batch x hidden) to the next stage and the receive of "
        "the previous stage's output. Rank order: stage s is rank s of the pipeline group; the "
        "next and previous ranks wrap around, as in the interleaved (virtual pipeline) schedule "
        "where the last stage's chunk feeds the first stage's next chunk, so every stage both "
        "sends and receives and the call is a ring shift. The returned tensor is the activation "
        "received from the previous stage. The hand-off is on the critical path of every "
        "micro-batch in warm-up and cool-down, tens of MiB each; a fast kernel writes the "
        "activation straight into the next GPU's buffer with a single flag instead of NCCL's "
        "staged send/recv protocol."
    ),
    categories=("pipeline",),
    source=Source("Megatron-LM",
                  "megatron/core/pipeline_parallel/p2p_communication.py: send_forward_recv_forward",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "micro_batch": 2, "hidden": 32},
           "default": {"seq": 4096, "micro_batch": 1, "hidden": 8192}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    process_groups=pp_layout,
)
