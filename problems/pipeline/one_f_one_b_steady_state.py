"""One steady-state step of the non-interleaved 1F1B pipeline schedule with a linear layer per
stage: forward, send_forward_recv_backward, backward (input and weight gradients),
send_backward_recv_forward (Megatron-LM forward_backward_pipelining_without_interleaving)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from problems import traffic
from problems.spec import Case, GroupLayout, Problem, Setting, Source, Traffic, tolerances


def pp_layout(world_size: int) -> GroupLayout:
    return {"pp_group": [list(range(world_size))]}


def _exchange(send: torch.Tensor, peer: int, *, group: dist.ProcessGroup) -> torch.Tensor:
    """Send `send` to `peer` and receive a tensor of the same shape from it, batched."""
    recv = torch.empty_like(send)
    ops = [dist.P2POp(dist.isend, send, peer, group=group),
           dist.P2POp(dist.irecv, recv, peer, group=group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return recv


def reference(input_tensor: torch.Tensor, saved_input: torch.Tensor, weight: torch.Tensor,
              next_microbatch: torch.Tensor, *,
              pp_group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    stages = dist.get_world_size(pp_group)
    stage = dist.get_rank(pp_group)
    first, last = stage == 0, stage == stages - 1
    # Forward of micro-batch i.
    output_tensor = input_tensor @ weight.t()
    # send_forward_recv_backward: the output goes to the next stage, which answers with the
    # gradient of the oldest in-flight micro-batch j. The last stage runs forward and backward
    # on the same micro-batch and takes the loss gradient itself (loss = 0.5 * ||y||^2).
    if last:
        output_tensor_grad = output_tensor
        stashed = input_tensor
    else:
        output_tensor_grad = _exchange(output_tensor, dist.get_global_rank(pp_group, stage + 1),
                                       group=pp_group)
        stashed = saved_input
    # Backward of micro-batch j: input gradient for the previous stage, weight gradient.
    input_tensor_grad = output_tensor_grad @ weight
    weight_grad = output_tensor_grad.t() @ stashed
    # send_backward_recv_forward: the input gradient goes back, the next input arrives. The
    # first stage reads its next micro-batch from the data loader instead.
    if first:
        next_input = next_microbatch.clone()
    else:
        next_input = _exchange(input_tensor_grad, dist.get_global_rank(pp_group, stage - 1),
                               group=pp_group)
    return input_tensor_grad, weight_grad, next_input


def make_inputs(case: Case) -> dict[str, torch.Tensor]:
    tokens, hidden = case["tokens"], case["hidden"]
    return {
        "input_tensor": case.randn(tokens, hidden, stream="x"),
        "saved_input": case.randn(tokens, hidden, stream="saved"),
        "weight": case.randn(hidden, hidden, stream="w", std=hidden ** -0.5),
        "next_microbatch": case.randn(tokens, hidden, stream="data"),
    }


def roofline(s: Setting) -> Traffic:
    tokens, hidden = s["tokens"], s["hidden"]
    act = tokens * hidden * s.itemsize
    w = hidden * hidden * s.itemsize
    # A middle stage sends the output and the input gradient and receives one of each.
    # HBM: read x, the stash, the received gradient and the weight; write y, dX, dW, next input.
    return Traffic(link_bytes=2 * traffic.send_recv(act), hbm_bytes=7 * act + 2 * w,
                   flops=6 * tokens * hidden * hidden)


PROBLEM = Problem(
    id=802,
    slug="pp-1f1b-steady-state",
    title="1F1B pipeline steady-state step: forward, exchange, backward, exchange",
    description=(
        "In the steady state of Megatron-LM's 1F1B schedule each stage does one forward and one "
        "backward per step: it runs micro-batch i forward, calls send_forward_recv_backward "
        "(send the output to the next stage, receive the gradient of the oldest in-flight "
        "micro-batch j from it), runs j backward (input gradient and weight gradient from the "
        "stashed input), then calls send_backward_recv_forward (send the input gradient to the "
        "previous stage, receive the next micro-batch's input). Each stage here is one linear "
        "layer. Rank order: stage s is rank s, a linear chain; the last stage keeps its output "
        "and uses it as its own loss gradient (loss = 0.5 ||y||^2, j = i, stash = its input), the "
        "first stage takes its next input from the data loader (next_microbatch) and keeps its "
        "input gradient. Outputs on every stage: input gradient, weight gradient, next input. "
        "The blocking exchanges chain the stages together within a step; a fast kernel sends "
        "the output tile by tile as the GEMM produces it and runs the weight-gradient GEMM "
        "while the input gradient is in flight."
    ),
    categories=("pipeline",),
    source=Source("Megatron-LM",
                  "megatron/core/pipeline_parallel/schedules.py: forward_backward_pipelining_without_interleaving",
                  "https://github.com/NVIDIA/Megatron-LM"),
    collectives=("send_recv",),
    reference=reference,
    make_inputs=make_inputs,
    sizes={"small": {"tokens": 16, "hidden": 32},
           "default": {"tokens": 4096, "hidden": 4096}},
    tolerances=tolerances(bfloat16=(5e-2, 5e-2), float32=(1e-4, 1e-4)),
    traffic=roofline,
    process_groups=pp_layout,
    tags=("backward",),
)
