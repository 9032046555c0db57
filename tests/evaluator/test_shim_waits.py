"""Where the rank's shim waits for its GPU (evaluator/shim/), with stand-ins and no processes.

Released call by call, the judge reads a call's slot as soon as the rank says "called": the rank
waits after each call. Released by block, the judge reads no slot before the block's answer: the
rank waits once, before it answers, and its header copies never block the host on a GPU (a copy
from pageable memory would: a hidden wait per call, docs/judge.md).
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import torch

from evaluator.channel import CALLED, TIMES, WAITING
from evaluator.shim import buffers as shim_buffers
from evaluator.shim.buffers import SharedBuffers
from evaluator.shim.calls import serve_calls
from evaluator.wire import HEADER_BYTES

CALLS = 3


class Commands:
    """The judge's side of the pipe: one block of CALLS calls, a "go" before each later call
    when released call by call, then ``finish``."""

    def __init__(self, release: str) -> None:
        calls = [{"inputs": {}, "slot": i, "capacity": HEADER_BYTES + 64, "align": False} for i in range(CALLS)]
        block = {"cmd": "calls", "block": 1, "calls": calls, **({"release": "block"} if release == "block" else {})}
        gos = [] if release == "block" else [{"cmd": "go", "block": 1, "call": i} for i in range(1, CALLS)]
        self.queue = [block, *gos, {"cmd": "finish"}]

    def next(self) -> dict[str, Any]:
        return self.queue.pop(0)


def serve_one_block(release: str) -> list[str]:
    """What the shim did, in order: calls, slot writes, waits and the words it sent."""
    events: list[str] = []
    channel = SimpleNamespace(send=lambda event, **_: events.append(event))
    runner = SimpleNamespace(ctx=SimpleNamespace(device=torch.device("cpu"), channel=channel), task={"task": 0},
                             align=lambda: events.append("align"),
                             call=lambda inputs: events.append("call") or torch.zeros(4))
    @contextlib.contextmanager
    def allocating():  # the heap's pool (shim/heap.py) around the call, never around the slot's write
        events.append("pool")
        yield
        events.append("unpool")

    buffers = SimpleNamespace(map=lambda device: None, inputs=lambda manifest: {}, allocating=allocating,
                              new_block=lambda: events.append("new block"),
                              write_outputs=lambda outputs, slot, capacity: events.append("write"))
    serve_calls(runner, buffers, Commands(release), lambda command: None, as_outputs=lambda result: [result],
                synchronize=lambda: events.append("wait"))
    return [event for event in events if event != WAITING]


def test_released_by_block_the_rank_waits_once_before_it_answers():
    assert serve_one_block("block") == ["new block"] + ["pool", "call", "unpool", "write"] * CALLS + ["wait", TIMES]


def test_released_call_by_call_the_rank_waits_after_each_call_and_before_each_called():
    per_call = ["pool", "call", "unpool", "wait", "write", "wait"]
    assert serve_one_block("call") == ["new block"] + (per_call + [CALLED]) * (CALLS - 1) + per_call + [TIMES]


class RecordedCopies:
    """A GPU output buffer as the shim sees it, on a machine without one: views record their copies."""

    torch_device = torch.device("cuda", 0)

    def __init__(self) -> None:
        self.copies: list[tuple[torch.Tensor, bool]] = []

    def view(self, offset: int, nbytes: int) -> SimpleNamespace:
        return SimpleNamespace(copy_=lambda source, non_blocking=False: self.copies.append((source, non_blocking)))


def test_on_a_gpu_the_header_is_copied_from_pinned_memory_without_a_wait(monkeypatch):
    pinned: list[torch.Tensor] = []

    def pin_memory(tensor: torch.Tensor) -> torch.Tensor:
        pinned.append(tensor.clone())
        return pinned[-1]

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
    memory = RecordedCopies()
    rank = SharedBuffers("0:0", "0:0")
    rank._output = memory  # type: ignore[assignment]
    rank.write_outputs([], slot=0, capacity=HEADER_BYTES + 64)
    [(source, non_blocking)] = memory.copies
    assert non_blocking and len(pinned) == 1 and source is pinned[0]


def test_on_the_cpu_the_header_is_the_bytes_as_encoded_and_not_pinned():
    header = b"\x02\x00\x00\x00{}"
    staged = shim_buffers.staged_header(header, torch.device("cpu"))
    assert bytes(staged.numpy()) == header
