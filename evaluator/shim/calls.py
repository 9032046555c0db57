"""The rank's half of a judged phase: answer the judge's ``calls`` commands until ``finish``.

A command lists calls; each names its inputs (a manifest of the input buffer) and the output
slot to fill. Only the first call's inputs are in the buffer when the command comes: after each
call the rank says ``called``, and the judge, once it has taken what it wants of that call's
outputs, writes the next call's inputs and says ``go``. So no call's inputs exist before the call
before it has answered, and a block cannot be answered with one batched collective. The rank
answers the block once, after the last call: the judge's clock runs from before it sends the
command until the side stands frozen after the answer, so this loop can neither shorten what is
measured nor change outputs after it (docs/judge.md).

Released by block (``--judge-release block``), every call's inputs are in their own regions
before the command and the judge reads no slot before the answer: the rank waits for its GPU once,
after the last call, not after each (a wait per call only holds the next launch behind the GPU).
Nothing the judge decides rests on these waits: a candidate can delete them from its own process
(solutions/broken/gpu_answers_before_done.py); the clock stops only once the side's GPUs are quiet.
"""

from __future__ import annotations

from typing import Any, Callable

from ..channel import CALLED, TIMES, WAITING
from .buffers import SharedBuffers


def serve_calls(runner: Any, buffers: SharedBuffers, commands: Any,
                on_finish: Callable[[dict[str, Any]], None], *, as_outputs: Callable[[Any], list[Any]],
                synchronize: Callable[[], None]) -> None:
    ctx, task = runner.ctx, runner.task["task"]
    buffers.map(ctx.device)
    ctx.channel.send(WAITING, task=task)
    while True:
        command = commands.next()
        if command["cmd"] == "calls":
            block, calls = command.get("block"), command["calls"]
            # Released by block, every call's inputs are already in their regions: no word
            # to the judge between calls (docs/judge.md, judge_release).
            by_block = command.get("release") == "block"
            buffers.new_block()
            for index, call in enumerate(calls):
                if index and not by_block:
                    _wait_for_go(commands, block, index)
                inputs = buffers.inputs(call["inputs"])
                if call.get("exact"):
                    # A re-check (the reference's ranks only, after the candidate has ended): the
                    # outputs and the exact answer's records, copied into the slot, not timed.
                    outputs = runner.exact_parts(inputs)  # it waited for the call's work itself
                    buffers.write_outputs(outputs, int(call["slot"]), int(call["capacity"]), in_place=False)
                else:
                    if call.get("align", True):
                        runner.align()
                    # Released by block on GPUs, the call allocates from the heap the judge reads
                    # in place (shim/heap.py); elsewhere there is none and nothing changes.
                    with buffers.allocating():
                        result = runner.call(inputs)
                    outputs = as_outputs(result)
                    if not by_block:
                        synchronize()  # call by call, each call's work (side streams too) ends before its slot is written
                    buffers.write_outputs(outputs, int(call["slot"]), int(call["capacity"]))
                if index + 1 < len(calls) and not by_block:
                    synchronize()  # on a GPU the slot's copy runs on the rank's stream: the judge reads it next
                    ctx.channel.send(CALLED, task=task, block=block, call=index)
            # Every slot's copies done before the answer (on a GPU they are queued on the rank's
            # stream, behind the calls' work): the judge reads them once the side stands frozen.
            synchronize()
            ctx.channel.send(TIMES, task=task, block=block)
        elif command["cmd"] == "finish":
            on_finish(command)
            return
        else:
            raise SystemExit(f"unknown command from the judge: {command['cmd']!r}")


def _wait_for_go(commands: Any, block: Any, index: int) -> None:
    command = commands.next()
    if command.get("cmd") != "go" or command.get("block") != block or command.get("call") != index:
        raise SystemExit(f"the judge said {command!r} where call {index} of block {block} was to start")
