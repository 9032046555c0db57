"""The timed phase of one rank, driven block by block by the evaluating parent.

Runs inside rank processes. The rank never decides when timing stops, how many calls a block
has, or which calls are checked: it reads one command at a time from a pipe the parent writes
(``block``, then ``finish``), so nothing candidate code can reach in this process (a frame, a
module attribute, a flag tensor) changes what is measured. Both sides' ranks run this at once,
and the parent alternates their blocks.

Call n gets inputs of its own (seed ``call_seed(seed, n)``), made outside the timed region into
slot n % copies of the rotation; the candidate keeps (a clone of) the outputs of the latest call
in every slot, sends their digests with each block, and saves the slots the parent names only
when it says ``finish``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable

import torch

from .channel import TIMES, WAITING
from .digest import PendingDigest, resolve
from .job import call_seed

# Bound before candidate code exists: reassigning os.read or json.loads later changes nothing.
_read = os.read
_loads = json.loads
_PendingDigest, _resolve = PendingDigest, resolve


class CommandReader:
    """JSON lines from the parent, one command at a time (blocking)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    def next(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = _read(self._fd, 65536)
            if not chunk:
                raise SystemExit("the evaluating parent closed the command pipe")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        command = _loads(line)
        if not isinstance(command, dict) or "cmd" not in command:
            raise SystemExit(f"malformed command from the parent: {line[:200]!r}")
        return command


def copy_count(nbytes: int, cfg: dict[str, Any], device: torch.device) -> int:
    """Input sets in rotation: enough that no call finds its inputs in L2."""
    if device.type == "cuda":
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        wanted = math.ceil(cfg["l2_multiple"] * l2 / max(nbytes, 1)) + 1
    else:
        wanted = 2
    return max(2, min(cfg["max_copies"], wanted, max(1, cfg["max_copy_bytes"] // max(nbytes, 1))))


class TimingSession:
    """One rank's input rotation and call counter for one task's timed phase."""

    def __init__(self, runner: Any, cfg: dict[str, Any], seed: int, *, keep_outputs: bool) -> None:
        self.runner = runner  # TaskRunner: inputs(seed), timed_call(inputs), tensor_bytes(inputs)
        self.seed = seed
        self.keep_outputs = keep_outputs
        first = runner.inputs(call_seed(seed, 0))
        self.count = copy_count(runner.tensor_bytes(first), cfg, runner.ctx.device)
        self.slots = [first] + [runner.inputs(call_seed(seed, n)) for n in range(1, self.count)]
        self.calls = 0
        self.device_align = cfg.get("gpu_align") == "device" and runner.ctx.device.type == "cuda"
        self.kept: dict[int, tuple[int, list[torch.Tensor]]] = {}  # slot -> (call, cloned outputs)

    def block(self, calls: int) -> tuple[list[float], list[float], list[list[Any]]]:
        """Run ``calls`` timed calls: their times, GPU gaps, and (when outputs are kept) the
        digest of the outputs each slot keeps at the end of the block, as ``[call, digests]``
        (digest.py): what the parent will hold the saved outputs to."""
        times: list[float] = []
        gaps: list[float] = []
        touched: list[int] = []
        for _ in range(calls):
            n, slot = self.calls, self.calls % self.count
            elapsed_ms, gap_ms, outputs = self.runner.timed_call(self.slots[slot], device_align=self.device_align)
            times.append(elapsed_ms)
            gaps.append(gap_ms)
            if self.keep_outputs:
                # Cloned: a candidate may return a buffer it reuses on the next call.
                self.kept[slot] = (n, [t.detach().clone() for t in outputs])
                if slot not in touched:
                    touched.append(slot)
            self.calls += 1
            self.slots[slot] = self.runner.inputs(call_seed(self.seed, n + self.count))
        # One digest per slot the block wrote, not per call: a slot's earlier calls in the block
        # can never be checked, and the block's end is on the parent's clock either way.
        pending = [_PendingDigest(self.kept[slot][1]) for slot in touched]
        values = _resolve(pending)
        return times, gaps, [[self.kept[slot][0], value] for slot, value in zip(touched, values)]

    def release(self) -> None:
        self.slots.clear()


def serve(runner: Any, cfg: dict[str, Any], seed: int, commands: CommandReader,
          on_finish: Callable[[TimingSession, dict[str, Any]], None], *, keep_outputs: bool) -> None:
    """Answer the parent's commands until ``finish``; then ``on_finish(session, command)``."""
    ctx, task = runner.ctx, runner.task["task"]
    session = TimingSession(runner, cfg, seed, keep_outputs=keep_outputs)
    ctx.channel.send(WAITING, task=task, copies=session.count)
    while True:
        command = commands.next()
        if command["cmd"] == "block":
            first = session.calls
            times, gaps, digests = session.block(int(command["calls"]))
            ctx.channel.send(TIMES, task=task, block=command.get("block"), first_call=first,
                             times_ms=times, gap_ms=gaps, digests=digests, copies=session.count)
        elif command["cmd"] == "finish":
            session.release()
            on_finish(session, command)
            return
        else:
            raise SystemExit(f"unknown command from the parent: {command['cmd']!r}")


def kept_outputs(session: TimingSession, slots: list[int]) -> list[tuple[int, list[torch.Tensor]]]:
    """The (call, outputs) the parent asked to see, by slot; a slot never used is skipped."""
    return [session.kept[s] for s in slots if s in session.kept]
