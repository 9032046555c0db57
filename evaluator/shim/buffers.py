"""The rank's end of the shared buffers (evaluator/wire.py): inputs in, outputs out."""

from __future__ import annotations

from typing import Any, Optional

import torch

from ..candidate import CandidateError
from ..report import FailureClass
from ..shared_memory import SharedMemory, attach
from ..wire import DTYPES, HEADER_BYTES, MAX_OUTPUTS, aligned, dtype_name, encode_header


def _too_large(message: str) -> CandidateError:
    return CandidateError(FailureClass.SHAPE_MISMATCH, message)


def _fd_and_size(arg: str) -> tuple[int, int]:
    fd, _, size = arg.partition(":")
    return int(fd), int(size or 0)


class SharedBuffers:
    """Mapped on first use, on the device the rank chose by then (its GPU's context current)."""

    def __init__(self, input_arg: str, output_arg: str) -> None:
        self._args = (_fd_and_size(input_arg), _fd_and_size(output_arg))
        self._input: Optional[SharedMemory] = None
        self._output: Optional[SharedMemory] = None

    def map(self, device: torch.device) -> None:
        if self._input is None:
            where = "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"
            (in_fd, in_size), (out_fd, out_size) = self._args
            self._input, self._output = attach(where, in_fd, in_size), attach(where, out_fd, out_size)

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

    def write_outputs(self, outputs: list[torch.Tensor], slot: int, capacity: int) -> None:
        if len(outputs) > MAX_OUTPUTS:
            raise _too_large(f"{len(outputs)} outputs; at most {MAX_OUTPUTS} can be returned")
        device = self.output.torch_device
        flat = [t.detach().contiguous().to(device).reshape(-1) for t in outputs]
        entries, offset = [], HEADER_BYTES
        for tensor, original in zip(flat, outputs):
            nbytes = tensor.numel() * tensor.element_size()
            entries.append([dtype_name(tensor.dtype), list(original.shape), offset, nbytes])
            offset = aligned(offset + nbytes)
        if offset > capacity:
            raise _too_large(f"the outputs take {offset - HEADER_BYTES} bytes; this problem's outputs "
                                  f"fit in {capacity - HEADER_BYTES}")
        for tensor, (_, _, start, nbytes) in zip(flat, entries):
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
