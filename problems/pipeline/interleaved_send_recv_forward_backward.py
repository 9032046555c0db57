"""Interleaved 1F1B steady-state exchange: in one batched p2p call each stage sends its forward
output to the next stage and its input gradient to the previous stage, and receives the next
forward input and the next output gradient (Megatron-LM
p2p_communication.send_forward_backward_recv_forward_backward)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def pp_layout(world_size: int) -> GroupLayout:
    return {"pp_group": [list(range(world_size))]}


def reference(output_tensor: torch.Tensor, input_tensor_grad: torch.Tensor, *,
              pp_group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    stages = dist.get_world_size(pp_group)
    stage = dist.get_rank(pp_group)
    next_rank = dist.get_global_rank(pp_group, (stage + 1) % stages)
    prev_rank = dist.get_global_rank(pp_group, (stage - 1) % stages)
    input_tensor = torch.empty_like(output_tensor)
    output_tensor_grad = torch.empty_like(input_tensor_grad)
    # Megatron's batch order: send to prev, receive from prev, send to next, receive from next.
    ops = [dist.P2POp(dist.isend, input_tensor_grad, prev_rank, group=pp_group),
           dist.P2POp(dist.irecv, input_tensor, prev_rank, group=pp_group),
           dist.P2POp(dist.isend, output_tensor, next_rank, group=pp_group),
           dist.P2POp(dist.irecv, output_tensor_grad, next_rank, group=pp_group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return input_tensor, output_tensor_grad


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    shape = (case["seq"], case["micro_batch"], case["hidden"])
    return {"output_tensor": case.randn(*shape, stream="act"),
            "input_tensor_grad": case.randn(*shape, stream="grad", std=1e-2)}


def roofline(s: Setting) -> Traffic:
    nbytes = s["seq"] * s["micro_batch"] * s["hidden"] * s.itemsize
    # Each stage sends two tensors (to two different peers) and receives two.
    return Traffic(link_bytes=2 * traffic.send_recv(nbytes), hbm_bytes=4 * nbytes)


PROBLEM = Problem(
    id=804,
    slug="pp-interleaved-send-recv-forward-backward",
    title="Interleaved pipeline steady state: bidirectional activation/gradient exchange",
    description=(
        "In the steady state of Megatron-LM's interleaved 1F1B schedule "
        "(forward_backward_pipelining_with_interleaving) each stage runs one forward and one "
        "backward of different model chunks, then calls send_forward_backward_recv_forward_backward: "
        "one batch_isend_irecv that sends the forward output to the next stage and the input "
        "gradient to the previous stage while receiving the next forward input from the "
        "previous stage and the next output gradient from the next stage. Rank order: stage s is "
        "rank s; with virtual pipeline chunks the stages form a ring (the last stage feeds the "
        "first stage's next chunk, and gradients flow back the same way), so every stage "
        "exchanges with both neighbours. Outputs: the received input activation and the "
        "received output gradient. Four transfers of tens of MiB happen between every pair of "
        "compute steps, so latency and per-transfer overhead show directly in the pipeline "
        "bubble; a fast kernel pushes both tensors to the neighbours' buffers concurrently with "
        "one signal each."
    ),
    categories=("pipeline",),
    source=Source("Megatron-LM",
                  "megatron/core/pipeline_parallel/p2p_communication.py: send_forward_backward_recv_forward_backward",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"seq": 16, "micro_batch": 2, "hidden": 32},
           "default": {"seq": 4096, "micro_batch": 1, "hidden": 8192}},
    tolerances=tolerances(bfloat16=(0.0, 0.0), float32=(0.0, 0.0)),
    traffic=roofline,
    world_sizes=(4, 8),
    world_size_note=("Megatron-LM requires more than two pipeline stages for the interleaved "
                     "schedule: with two, the previous and next stage are the same rank and the "
                     "two transfers in each direction of one batch could not be told apart."),
    process_groups=pp_layout,
)
