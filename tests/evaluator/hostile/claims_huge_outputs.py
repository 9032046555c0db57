"""Attack (all-reduce), class 8: make the judge load more than it can hold. The harness's output
writer is replaced by one that describes a 1 TiB output in the slot's header (the judge outside),
and the returned tensor is as large as the rank may allocate (the in-rank judge loaded files
whole before looking at their shapes)."""

import json
import struct

import torch
import torch.distributed as dist

TRIALS = 1
_calls = 0


def _patch():
    try:
        from evaluator.shim import buffers
    except ImportError:
        return

    def write_outputs(self, outputs, slot, capacity):
        body = json.dumps({"outputs": [["bfloat16", [2**39], 65536, 2**40]]}).encode()
        raw = bytearray(struct.pack("<I", len(body)) + body)
        self.output.view(slot, len(raw)).copy_(torch.frombuffer(raw, dtype=torch.uint8))

    buffers.SharedBuffers.write_outputs = write_outputs


def solution(x, *, group):
    global _calls
    _calls += 1
    if _calls == 1:
        _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    if _calls > TRIALS:
        return torch.zeros(2**28, dtype=torch.bfloat16)  # 512 MiB
    return out
