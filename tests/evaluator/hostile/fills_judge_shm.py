"""Attack (all-reduce): make the judge keep as much of the host's memory as the output slots allow.

The judge saves its copy of every trial's and every checked call's outputs (``Judge.save_outputs``)
under its work directory, which is ``/dev/shm`` (``api._workdir``): host memory, outside every
limit of the candidate's sandbox, until the evaluation ends. What a rank leaves in a slot is only
bounded by the slot (4 x the problem's HBM bytes per call, at least 1 MiB; ``judge/inputs.py``
``output_capacity``), and the judge saves whatever the header describes before anything compares
shapes. So the replaced output writer describes one float32 output filling the whole slot
(no bytes need writing: the slot's memory is copied as it stands). Every trial and every drawn
timed call then costs the judge a full slot in /dev/shm: (trials + 64) x world x slot.

At ``--size small`` the slot is its 1 MiB floor: ~140 MiB of /dev/shm against ~1 MiB for the
honest outputs (128x). At the default size of all-reduce on the CPU the slot is 512 MiB (4 x 2 x
64 MiB): (5 + 64) x 2 x 512 MiB = 69 GiB in /dev/shm, three times this machine's 23 GiB of memory
(the honest outputs: 8.6 GiB). tmpfs then refuses the write (``torch.save`` raises OSError, which
nothing catches: no verdict) or the host runs out of memory for everyone. Each call here is
honest until its outputs are replaced, so the verdict at small size is a shape mismatch, after
the judge held the memory for the whole run.

Command: .venv/bin/python -m evaluator.cli eval --problem all-reduce \
    --solution tests/evaluator/hostile/fills_judge_shm.py --world-size 2 --device cpu --size small
(watch ``du -sm /dev/shm/pkb-eval-*/candidate`` meanwhile)

Measured 2026-11-28 (sandbox on), peak of the judge's ``/dev/shm/pkb-eval-*/candidate`` sampled
every 0.3-0.5 s: this file 132 MiB, 135,296 KiB, 133,640 KiB (FAIL shape_mismatch each time,
after the whole run); ``solutions/broken/cpu_correct.py``: 1,776 KiB (PASS). 76x at the small size;
the default size was not run (it would fill this shared machine's /dev/shm).

Fix: the judge knows what the reference returns (the problem's output shapes and dtypes for the
setting, or the first trial's reference outputs): check each copied call's header against them in
``RankBuffers.read_outputs`` (a wrong shape or dtype fails the candidate there and then, nothing
saved), and size the slot from those shapes rather than 4 x the HBM bytes. Independently, the
judge's saved copies should count against a budget of their own (the side's disk is budgeted,
the judge's /dev/shm is not).
"""

import json
import struct

import torch
import torch.distributed as dist

_patched = False


def _patch():
    try:
        from evaluator.shim import buffers
    except ImportError:
        return

    def write_outputs(self, outputs, slot, capacity):
        start = 65536
        numel = (capacity - start) // 4
        body = json.dumps({"outputs": [["float32", [numel], start, numel * 4]]}).encode()
        raw = bytearray(struct.pack("<I", len(body)) + body)
        self.output.view(slot, len(raw)).copy_(torch.frombuffer(raw, dtype=torch.uint8))

    buffers.SharedBuffers.write_outputs = write_outputs


def solution(x, *, group):
    global _patched
    if not _patched:
        _patched = True
        _patch()
    out = x.clone()
    dist.all_reduce(out, group=group)
    return out
