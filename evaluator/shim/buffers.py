"""The rank's end of the shared buffers (evaluator/wire.py): inputs in, outputs out."""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Optional

import torch

from ..candidate import CandidateError
from ..report import FailureClass
from ..shared_memory import SharedMemory, attach
from ..wire import DTYPES, HEADER_BYTES, IN_HEAP, MAX_OUTPUTS, aligned, dtype_name, encode_header


def _too_large(message: str) -> CandidateError:
    return CandidateError(FailureClass.SHAPE_MISMATCH, message)


def _fd_and_size(arg: str) -> tuple[int, int]:
    fd, _, size = arg.partition(":")
    return int(fd), int(size or 0)


class SharedBuffers:
    """Mapped on first use, on the device the rank chose by then (its GPU's context current)."""

    def __init__(self, input_arg: str, output_arg: str, heap_arg: Optional[str] = None) -> None:
        self._args = (_fd_and_size(input_arg), _fd_and_size(output_arg))
        self._heap_arg = _fd_and_size(heap_arg) if heap_arg else None
        self._input: Optional[SharedMemory] = None
        self._output: Optional[SharedMemory] = None
        self.heap: Any = None  # shim/heap.py's OutputHeap, when the judge handed one (GPUs, by block)
        self._kept: list[torch.Tensor] = []  # outputs left in the heap, alive until the judge has read them
        self._spans: list[tuple[int, int]] = []  # where they lie
        # Off for good once a call returns memory an earlier call of its block returned: the
        # candidate rewrites its outputs, so they must be copied as they return (below).
        self._in_place = True

    def map(self, device: torch.device) -> None:
        if self._input is None:
            where = "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"
            (in_fd, in_size), (out_fd, out_size) = self._args
            self._input, self._output = attach(where, in_fd, in_size), attach(where, out_fd, out_size)
            if self._heap_arg is not None and device.type == "cuda":
                from .heap import OutputHeap

                self.heap = OutputHeap(attach(where, *self._heap_arg))

    def allocating(self) -> ContextManager[Any]:
        """Around a call: the candidate's allocations come from the heap, when there is one."""
        return self.heap.allocating() if self.heap is not None else contextlib.nullcontext()

    def new_block(self) -> None:
        """The judge read the last block's outputs before it commanded this one: let them go."""
        self._kept, self._spans = [], []
        if self.heap is not None:
            self.heap.recycle()

    def _left_in_place(self, tensor: torch.Tensor, nbytes: int) -> Optional[int]:
        """The heap offset of an output to leave where it is, or None to copy it. Within a block
        the kept outputs cannot be handed out again by the allocator, so memory returned twice
        is the candidate's own reuse: the earlier call's bytes are already overwritten (judged
        wrong if that call is drawn; the warm-up's blocks, never drawn, show it first), and
        from then on every output is copied as it returns, as without a heap."""
        if self.heap is None or not self._in_place or not nbytes:
            return None
        offset = self.heap.offset_of(tensor)
        if offset is None:
            return None
        if any(offset < end and start < offset + nbytes for start, end in self._spans):
            self._in_place = False
            return None
        self._spans.append((offset, offset + nbytes))
        self._kept.append(tensor)
        return offset

    @property
    def input(self) -> SharedMemory:
        assert self._input is not None, "map() first"
        return self._input

    @property
    def output(self) -> SharedMemory:
        assert self._output is not None, "map() first"
        return self._output

    def inputs(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The call's keyword arguments: tensors that are views of the input buffer (the judge
        compares those bytes with its own copy after the call), and plain values."""
        values: dict[str, Any] = {}
        for name, dtype, shape, offset, nbytes in manifest["tensors"]:
            if nbytes == 0:
                values[name] = torch.empty(shape, dtype=DTYPES[dtype])
                continue
            values[name] = self.input.view(offset, nbytes).view(DTYPES[dtype]).view(shape)
        for name, value in manifest["values"].items():
            values[name] = _decode(value)
        return values

    def write_outputs(self, outputs: list[torch.Tensor], slot: int, capacity: int, in_place: bool = True) -> None:
        """``outputs`` into the slot at ``slot`` (``capacity`` bytes, header included), each copied
        there or, with ``in_place``, left where it lies when that is in the heap."""
        if len(outputs) > MAX_OUTPUTS:
            raise _too_large(f"{len(outputs)} outputs; at most {MAX_OUTPUTS} can be returned")
        device = self.output.torch_device
        entries: list[list[Any]] = []
        copies: list[tuple[torch.Tensor, int, int]] = []
        offset = HEADER_BYTES
        for original in outputs:
            tensor = original.detach()
            nbytes = tensor.numel() * tensor.element_size()
            in_heap = self._left_in_place(tensor, nbytes) if in_place else None
            if in_heap is not None:
                # Left where it is: the judge reads it through its own mapping after the block.
                entries.append([dtype_name(tensor.dtype), list(original.shape), in_heap, nbytes, IN_HEAP])
                continue
            flat = tensor.contiguous().to(device).reshape(-1)
            entries.append([dtype_name(flat.dtype), list(original.shape), offset, nbytes])
            copies.append((flat, offset, nbytes))
            offset = aligned(offset + nbytes)
        if offset > capacity:
            raise _too_large(f"the outputs take {offset - HEADER_BYTES} bytes; this problem's outputs "
                                  f"fit in {capacity - HEADER_BYTES}")
        for tensor, start, nbytes in copies:
            if nbytes:
                self.output.view(slot + start, nbytes).copy_(tensor.view(torch.uint8))
        header = encode_header(entries)
        # Queued behind the data's copies, not waited for: the rank waits once, before it answers
        # (shim/calls.py), and the judge reads a slot only after that answer.
        self.output.view(slot, len(header)).copy_(staged_header(header, device), non_blocking=True)


def staged_header(header: bytes, device: torch.device) -> torch.Tensor:
    """The header's bytes, where copying them to ``device`` need not wait. Into a GPU, a copy
    from pageable host memory blocks the host until the stream has drained (a synchronize per
    call, hidden); from pinned memory it is only queued. The pinned bytes may be dropped once
    queued: PyTorch's pinned-memory cache records the copy's stream and reuses them only after it.
    On the CPU the copy is a plain memcpy either way."""
    pageable = torch.frombuffer(bytearray(header), dtype=torch.uint8)
    return pageable.pin_memory() if device.type == "cuda" else pageable


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "dtype" in value:
        return DTYPES[value["dtype"]]
    if isinstance(value, dict) and "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value
