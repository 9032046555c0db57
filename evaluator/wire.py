"""The layout of the shared buffers between the judge and a rank: what both ends agree on.

The judge (evaluator/judge/) writes a call's inputs into a rank's input buffer and describes
them in the call's command (a manifest); the rank (evaluator/shim/) writes the call's outputs
into the slot of its output buffer that the command names, as a header and the tensors' bytes.
Nothing here decides anything: it only names where bytes go.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import torch

ALIGN = 64  # every tensor starts on a 64-byte boundary: any dtype's view of it is aligned
HEADER_BYTES = 64 * 1024  # an output slot's header: 4 bytes of length, then JSON, then padding
MAX_OUTPUTS = 64
# An output entry's fifth field when its bytes were left in the rank's output heap (GPUs, released
# by block: shim/heap.py): its offset is then into the heap, not the slot.
IN_HEAP = "heap"
# The heap is handed out, and sized by the judge, in segments of this many bytes: the caching
# allocator's large segments are 2 MiB multiples, and each starts on such a boundary.
HEAP_SEGMENT = 2 << 20
_LENGTH = struct.Struct("<I")

DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
    torch.float8_e4m3fn, torch.float8_e5m2)}


def dtype_name(dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"tensors of {name} cannot cross the shared buffers")
    return name


def round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def aligned(n: int) -> int:
    return round_up(n, ALIGN)


def encode_header(entries: list[list[Any]]) -> bytes:
    """``[[dtype, shape, offset, nbytes(, IN_HEAP)], ...]`` as the slot's header bytes."""
    body = json.dumps({"outputs": entries}).encode()
    if _LENGTH.size + len(body) > HEADER_BYTES:
        raise ValueError(f"{len(entries)} outputs do not fit the {HEADER_BYTES}-byte header")
    return _LENGTH.pack(len(body)) + body


def header_length(raw: bytes) -> int:
    return _LENGTH.unpack_from(raw)[0]
