"""The rank's half of a judged phase: answer the judge's ``calls`` commands until ``finish``.

A command lists calls; each names its inputs (a manifest of the input buffer) and the output
slot to fill. The rank runs them back to back and answers once, after the last: the judge's clock
runs from before it sends the command until the side stands frozen after the answer, so this
loop can neither shorten what is measured nor change outputs after it (docs/judge.md).
"""

from __future__ import annotations

from typing import Any, Callable

from ..channel import TIMES, WAITING
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
            for call in command["calls"]:
                inputs = buffers.inputs(call["inputs"])
                if call.get("align", True):
                    runner.align()
                outputs = as_outputs(runner.call(inputs))
                synchronize()
                buffers.write_outputs(outputs, int(call["slot"]), int(call["capacity"]))
            ctx.channel.send(TIMES, task=task, block=command.get("block"))
        elif command["cmd"] == "finish":
            on_finish(command)
            return
        else:
            raise SystemExit(f"unknown command from the judge: {command['cmd']!r}")
