"""The judge's end of one rank's shared buffers (layout: evaluator/wire.py).

Two shared memories per rank and side (evaluator/shared_memory: memory files on the CPU, driver
allocations on the rank's GPU), made here and handed to the rank at start: the input buffer (a
ring of regions, call i in region i % ring) and the output buffer (a ring of slots alike); calls
are released one at a time, so a region or slot is reused only after the call before it returned. The rank can write both;
so the judge keeps its own copy of every input it wrote and compares after each block, and reads
an output slot once the rank has said the call is done (before it releases the next call's
inputs) or while the side stands frozen, bounded by the slot's size before any byte is
interpreted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch

from ..shared_memory import SharedMemory, create
from ..wire import DTYPES, HEADER_BYTES, HEAP_SEGMENT, IN_HEAP, MAX_OUTPUTS, aligned, dtype_name, header_length, round_up


def input_bytes(inputs: dict[str, Any]) -> int:
    """Bytes one call's inputs take in the input buffer (each tensor aligned)."""
    return sum(aligned(t.numel() * t.element_size()) for t in inputs.values() if isinstance(t, torch.Tensor))


@dataclass
class WrittenCall:
    """One call's inputs as the judge wrote them: the manifest the rank gets, and our copies."""

    manifest: dict[str, Any]
    tensors: dict[str, tuple[torch.Tensor, int, int]]  # name -> (our copy, offset, nbytes)


def output_bound(capacity: int) -> int:
    """The most bytes one rank's outputs of one call may take: half the slot's capacity. Every
    reference's outputs fit in that half (tests/problems/test_oracles.py); the judge reads no more
    (``RankBuffers.read_outputs``) and sizes what it and a side keep from it (api.py)."""
    return max(capacity, 1) // 2


def bytes_differ(ours: torch.Tensor, theirs: torch.Tensor) -> torch.Tensor:
    """Whether two byte tensors of one length differ: a 0-dim bool tensor on their device, not
    waited for. Compared as 8-byte words where the length allows (8 x fewer elements to reduce;
    both start 64-byte aligned, wire.ALIGN), the tail byte by byte."""
    words = ours.numel() // 8 * 8
    parts = []
    if words:
        parts.append((ours[:words].view(torch.int64) != theirs[:words].view(torch.int64)).any())
    if words < ours.numel():
        parts.append((ours[words:] != theirs[words:]).any())
    return parts[0] if len(parts) == 1 else torch.stack(parts).any()


# The rank's output heap (shim/heap.py): a block's outputs, each in the caching allocator's 2 MiB
# segments, and room for temporaries; within a budget per rank and side. Sized from the problem's
# HBM bytes (more than any reference's outputs but a few): a candidate whose allocations outgrow it
# only pays the slot copy for what lands outside.
HEAP_BUDGET_BYTES = 8 << 30


def heap_bytes(calls: int, hbm_bytes: int) -> int:
    return min(HEAP_BUDGET_BYTES, calls * round_up(max(hbm_bytes, 1), HEAP_SEGMENT) + 64 * HEAP_SEGMENT)


# More dimensions than torch itself allows in practice: an output description with more is not ours.
MAX_DIMS = 16


class OutputError(Exception):
    """What the rank left in an output slot is not a set of outputs (its message says why)."""


class RankBuffers:
    def __init__(self, name: str, calls: int, call_input_bytes: int, slot_bytes: int,
                 device: str = "cpu", heap_bytes: int = 0) -> None:
        """``calls``: regions and slots in the ring (call i uses i % calls); ``device``: ``cpu``,
        or ``cuda:N`` for the GPU this rank runs on; ``heap_bytes``: an output heap the rank
        allocates its calls' outputs from and the judge reads in place (shim/heap.py), or none."""
        self.calls = calls
        self.device = device
        self.region = aligned(max(call_input_bytes, 1))
        self.slot_bytes = aligned(HEADER_BYTES + max(slot_bytes, 1))
        # Honest outputs take at most half the slot's capacity (tests/problems/test_oracles.py); the
        # judge copies and keeps what it reads, so it reads no more than that (red team,
        # fills_judge_shm: slot-sized outputs made the judge keep 76 x an honest footprint).
        self.max_output_bytes = output_bound(slot_bytes)
        self.input: SharedMemory = create(device, f"pkb-{name}-inputs", calls * self.region)
        self.output: SharedMemory = create(device, f"pkb-{name}-outputs", calls * self.slot_bytes)
        self.heap: Optional[SharedMemory] = create(device, f"pkb-{name}-heap", heap_bytes) if heap_bytes else None
        self.heap_spans: list[tuple[int, int, int]] = []  # (start, end, call) read in place this block
        self.outputs_read = {"in_place": 0, "copied": 0}  # of the calls read, how their outputs came

    def _memories(self) -> list[SharedMemory]:
        return [self.input, self.output] + ([self.heap] if self.heap is not None else [])

    def fds(self) -> tuple[int, ...]:
        return tuple(memory.fd() for memory in self._memories())

    def rank_args(self) -> list[str]:
        """How the rank finds its buffers: ``fd:size`` of each (a GPU descriptor has no size)."""
        return [f"{memory.fd()}:{memory.size}" for memory in self._memories()]

    def close_fds(self) -> None:
        """Once the rank has its own descriptors: ours are no longer needed (the maps stay)."""
        for memory in self._memories():
            memory.close_fd()

    def new_block(self) -> None:
        """The rank lets the last block's outputs in its heap go once it has this block's command."""
        self.heap_spans = []

    def slot(self, call: int) -> int:
        return (call % self.calls) * self.slot_bytes

    def stage_inputs(self, call: int, inputs: dict[str, Any]) -> WrittenCall:
        """Our copy of one call's inputs and where they go; nothing reaches the buffer before
        ``release`` (the rank must not see a call's inputs before the call before it is done)."""
        base = (call % self.calls) * self.region
        offset = base
        tensors: dict[str, tuple[torch.Tensor, int, int]] = {}
        entries, values = [], {}
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor):
                data = value.detach().contiguous().to(self.device)
                nbytes = data.numel() * data.element_size()
                entries.append([name, dtype_name(data.dtype), list(data.shape), offset, nbytes])
                tensors[name] = (data, offset, nbytes)
                offset = aligned(offset + nbytes)
            else:
                values[name] = _encode(value)
        if offset - base > self.region:
            raise ValueError(f"a call's inputs take {offset - base} bytes, more than the {self.region} measured")
        return WrittenCall({"tensors": entries, "values": values}, tensors)

    def release(self, written: WrittenCall, *, wait: bool = True) -> None:
        """Write a staged call's inputs into the buffer, finished before this returns; with
        ``wait=False`` only queued (on a GPU), and ``settle`` must come before the rank is told."""
        for data, offset, nbytes in written.tensors.values():
            if nbytes:
                self.input.view(offset, nbytes).copy_(data.reshape(-1).view(torch.uint8))
        if wait:
            self.settle()

    def settle(self) -> None:
        """Wait for what the judge queued on this rank's GPU: the rank reads the inputs once we say go."""
        if self.device != "cpu":
            torch.cuda.synchronize(self.device)

    def input_changes(self, written: WrittenCall, may_overwrite: tuple[str, ...]) -> list[tuple[str, torch.Tensor]]:
        """Each compared input's name with whether its bytes in the buffer are no longer the ones
        we wrote, as a flag not yet read (``bytes_differ``): queued on the GPU before the region is
        written again, read after the block, so the comparison costs the judge no wait per call."""
        return [(name, bytes_differ(data.reshape(-1).view(torch.uint8), self.input.view(offset, nbytes)))
                for name, (data, offset, nbytes) in written.tensors.items()
                if name not in may_overwrite and nbytes]

    def changed_inputs(self, written: WrittenCall, may_overwrite: tuple[str, ...]) -> list[str]:
        """Inputs whose bytes in the buffer are no longer the ones we wrote."""
        return [name for name, differs in self.input_changes(written, may_overwrite) if bool(differs)]

    def read_outputs(self, call: int, span: int = 1) -> list[torch.Tensor]:
        """Our own copy of what the rank left in slot ``call``; every field is checked against the
        slot's bounds before a byte of data is read. ``span``: the slot and the ``span - 1`` after
        it, as one (the reference's re-checks, whose exact records travel beside their outputs:
        then all of it may be read, not half)."""
        assert span == 1 or (call % self.calls) + span <= self.calls, "a span of slots wraps the ring"
        base = self.slot(call)
        limit = span * self.slot_bytes  # where this slot's data must end
        bound = self.max_output_bytes if span == 1 else limit - HEADER_BYTES
        raw = self.output.view(base, HEADER_BYTES).cpu().numpy().tobytes()
        length = header_length(raw)
        if not 0 < length <= HEADER_BYTES - 4:
            raise OutputError("no outputs were written for this call")
        try:
            header = json.loads(raw[4:4 + length])
            entries = header["outputs"]
            if not isinstance(entries, list) or len(entries) > MAX_OUTPUTS:
                raise ValueError
        except (ValueError, KeyError, TypeError, RecursionError):  # deep nesting recurses past the limit
            raise OutputError("the outputs' description is not the harness's") from None
        outputs, end, total = [], HEADER_BYTES, 0
        for entry in entries:
            in_heap = isinstance(entry, list) and len(entry) == 5 and entry[4] == IN_HEAP
            described = self._described(entry[:4] if in_heap else entry)
            total += described[3]
            if total > bound:  # before a byte of it is read
                raise OutputError(f"the outputs take more than {bound} bytes, twice what any "
                                  "reference's outputs take for this problem and size" if span == 1 else
                                  f"a re-check's outputs and exact records take more than its {bound} bytes")
            if in_heap:
                outputs.append(self._heap_output(described, call))
            else:
                outputs.append(self._one_output(described, base, end, limit))
                end = described[2] + described[3]
            self.outputs_read["in_place" if in_heap else "copied"] += 1
        return outputs

    def _described(self, entry: Any) -> tuple[torch.dtype, list[int], int, int]:
        """An output's dtype, shape, offset and bytes, each checked for what it is and for a
        size the slot could hold, before anything is read."""
        try:
            dtype_key, shape, offset, nbytes = entry
            dtype = DTYPES[dtype_key]
            if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(
                    type(v) is int for v in (*shape, offset, nbytes)):
                raise TypeError  # the harness writes plain integers: not floats, bools or Infinity
        except (ValueError, KeyError, TypeError):
            raise OutputError("the outputs' description is not the harness's") from None
        numel = 1
        for size in shape:
            if size < 0:
                raise OutputError(f"an output has a negative dimension {shape}")
            if size > self.slot_bytes:  # even beside a zero: an empty tensor of it overflows its strides
                raise OutputError(f"an output's dimension {size} is more than the {self.slot_bytes - HEADER_BYTES} "
                                  "bytes this problem's outputs can take")
            numel *= size
        if numel * torch.empty((), dtype=dtype).element_size() != nbytes:
            raise OutputError(f"the outputs take more than the {self.slot_bytes - HEADER_BYTES} bytes "
                              "this problem's outputs can take, or overlap")
        return dtype, shape, offset, nbytes

    def _heap_output(self, described: tuple[torch.dtype, list[int], int, int], call: int) -> torch.Tensor:
        """Our copy of an output the rank left in its heap: inside the heap, and overlapping no
        other output read in place this block (two calls cannot both be right in one place; one
        of them would be judged by what a later call left there)."""
        dtype, shape, offset, nbytes = described
        if self.heap is None or nbytes == 0 or offset < 0 or offset + nbytes > self.heap.size:
            raise OutputError("an output said to be in the heap lies outside it")
        for start, end, other in self.heap_spans:
            if offset < end and start < offset + nbytes:
                raise OutputError(f"an output overlaps one of call {other}'s in the heap: each call's "
                                  "outputs must be its own tensors, alive until the block ends")
        self.heap_spans.append((offset, offset + nbytes, call))
        return self.heap.view(offset, nbytes).clone().view(dtype).view(shape)

    def _one_output(self, described: tuple[torch.dtype, list[int], int, int], base: int, after: int,
                    limit: int) -> torch.Tensor:
        dtype, shape, offset, nbytes = described
        if offset < after or offset + nbytes > limit:
            raise OutputError(f"the outputs take more than the {limit - HEADER_BYTES} bytes "
                              "this problem's outputs can take, or overlap")
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype)
        copy = self.output.view(base + offset, nbytes).clone()
        return copy.view(dtype).view(shape)

    def close(self) -> None:
        self.close_fds()
        for memory in self._memories():
            memory.close()


def _encode(value: Any) -> Union[dict[str, Any], list[Any], Any]:
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"an input of type {type(value).__name__} cannot cross the shared buffers")


