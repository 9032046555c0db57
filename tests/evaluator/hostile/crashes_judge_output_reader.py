"""Attack (all-reduce): end the evaluation with no verdict, through the output slot's header.

The judge reads each output's description from the slot header (``judge/buffers.py``
``RankBuffers._one_output``) and catches ValueError, KeyError and TypeError around the parsing
only. An empty output (``nbytes`` 0) passes every bound (``numel * itemsize == 0``, the offset in
the slot), and is then made with ``torch.empty(shape)`` outside any ``try``. Three headers the
harness never writes make that raise something nothing in ``Judge.copy_outputs`` /
``run_calls`` / ``api._run_judged`` catches:

- ``VARIANT = "inf"`` (as committed): a dimension of ``Infinity`` (Python's ``json.loads`` accepts it):
  ``int(inf)`` raises OverflowError (an ArithmeticError, not a ValueError) before any bound;
- ``stride``: shape ``[0, 2**62, 2**62]``: ``torch.empty`` raises RuntimeError ("Stride
  calculation overflowed");
- ``long``: shape ``[0, 10**30]``: ``torch.empty`` raises TypeError, outside the ``try``;
- ``strings``: an offset and a size as JSON strings (``"65536"``, ``"0"``): ``int()`` takes them,
  but the next output's bound is computed from the raw entry (``end = entry[2] + entry[3]``, string
  concatenation) and ``offset < after`` raises TypeError.

The first trial's outputs are copied by the judge right after the first call, so a candidate that
would fail (its calls here are honest until it decides otherwise) ends the evaluation with a
traceback instead of a report, at will (the worker posts "no-report").

Command: .venv/bin/python -m evaluator.cli eval --problem all-reduce \
    --solution tests/evaluator/hostile/crashes_judge_output_reader.py --world-size 2 --device cpu --size small

Measured 2026-11-28 (sandbox on, redteam branch at 72f5d6f): three runs of ``inf``, each rc=1 after
~15 s with a traceback ending ``OverflowError: cannot convert float infinity to integer`` in
``_one_output`` (from ``Judge.trials``, trial 0); no report. ``stride``: rc=1, ``RuntimeError:
Stride calculation overflowed``; ``long``: rc=1, ``TypeError: empty(): argument 'size' failed to
unpack``; ``strings``: rc=1, ``TypeError: '<' not supported between instances of 'int' and 'str'``.

Fix (judge/buffers.py ``_one_output``): convert and bound before making anything: each dimension
an ``int`` (reject bool/float: ``type(s) is int``), ``0 <= s < 2**40``, at most 16 dimensions,
offsets and sizes ``type(v) is int`` too (and ``after`` from the converted values), and make
the empty tensor inside a ``try`` that turns any exception into OutputError; better still,
``Judge.copy_outputs`` catching every Exception from ``read_outputs`` as the candidate's
protocol_violation (the bytes are the candidate's), so no parse of its bytes can end the judge.
"""

import json
import struct

import torch
import torch.distributed as dist

_SHAPES = {"strings": None, "inf": "[0, Infinity]", "stride": json.dumps([0, 2**62, 2**62]), "long": json.dumps([0, 10**30])}
VARIANT = "inf"  # or "stride", "long", "strings" (the rank gets no environment: python -I)
_patched = False


def _patch():
    try:
        from evaluator.shim import buffers
    except ImportError:
        return
    shape = _SHAPES[VARIANT]

    def write_outputs(self, outputs, slot, capacity):
        body = ('{"outputs": [["float32", %s, 65536, 0]]}' % shape).encode() if shape else \
            b'{"outputs": [["float32", [0], "65536", "0"], ["float32", [0], 70000, 0]]}'
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
