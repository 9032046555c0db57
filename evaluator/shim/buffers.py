"""The rank's end of the shared buffers (evaluator/wire.py): inputs in, outputs out."""

from __future__ import annotations

import mmap
import os
from typing import Any

import torch

from ..candidate import CandidateError
from ..report import FailureClass
from ..wire import DTYPES, HEADER_BYTES, MAX_OUTPUTS, aligned, dtype_name, encode_header


def _too_large(message: str) -> CandidateError:
    return CandidateError(FailureClass.SHAPE_MISMATCH, message)


class SharedBuffers:
    def __init__(self, input_fd: int, output_fd: int) -> None:
        self.input = _map(input_fd)
        self.output = _map(output_fd)

    def inputs(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The call's keyword arguments: tensors that are views of the input buffer (the judge
        compares those bytes with its own copy after the call), and plain values."""
        values: dict[str, Any] = {}
        for name, dtype, shape, offset, nbytes in manifest["tensors"]:
            if nbytes == 0:
                values[name] = torch.empty(shape, dtype=DTYPES[dtype])
                continue
            raw = torch.frombuffer(self.input, dtype=torch.uint8, count=nbytes, offset=offset)
            values[name] = raw.view(DTYPES[dtype]).view(shape)
        for name, value in manifest["values"].items():
            values[name] = _decode(value)
        return values

    def write_outputs(self, outputs: list[torch.Tensor], slot: int, capacity: int) -> None:
        if len(outputs) > MAX_OUTPUTS:
            raise _too_large(f"{len(outputs)} outputs; at most {MAX_OUTPUTS} can be returned")
        flat = [t.detach().contiguous().cpu().reshape(-1) for t in outputs]
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
                target = torch.frombuffer(self.output, dtype=torch.uint8, count=nbytes, offset=slot + start)
                target.copy_(tensor.view(torch.uint8))
        header = encode_header(entries)
        self.output[slot:slot + len(header)] = header


def _map(fd: int) -> mmap.mmap:
    size = os.fstat(fd).st_size
    mapped = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    return mapped


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "dtype" in value:
        return DTYPES[value["dtype"]]
    if isinstance(value, dict) and "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value
