"""The exact answer to a reference call: the same reference, run with every floating value in float64.

Runs in the reference side's rank processes, on the same inputs as the native call. Inputs are
upcast (losslessly), and while the reference runs, every floating dtype it asks for (``.float()``,
``dtype=torch.float32``, the default dtype) becomes float64, so its "compute in fp32" steps become
float64 steps and its collectives reduce float64 (gloo and NCCL both do). What float64 cannot
stand in for is recorded, not guessed: a cast to float8, floating values quantized to int8, an
output of another dtype or shape. The parent judges such outputs by the problem's tolerance instead.

The answer travels as a residual ``exact - native`` per output (``residual_record``): the
judge needs ``exact`` only to a small fraction of the native output's error, and a residual in
the output's own dtype keeps the reference side's files at twice today's size, not five times.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .config import ResourceLimits

PROMOTED = {torch.float32: torch.float64, torch.bfloat16: torch.float64, torch.float16: torch.float64,
            torch.complex64: torch.complex128}
WIDE = (torch.float64, torch.complex128)
# Floating values cast to these are quantized: where the grid's rounding falls is part of the
# problem (ZeRO++'s int8 blocks), and float64 would move it. Wider integers hold indices.
QUANTIZED = (torch.int8, torch.uint8, torch.int16)


def upcast(value: Any) -> Any:
    """A copy of ``value`` with every floating tensor in float64 (complex in complex128)."""
    if isinstance(value, torch.Tensor):
        wide = PROMOTED.get(value.dtype)
        return value.to(wide, copy=True) if wide is not None else value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(upcast(item) for item in value)
    if isinstance(value, dict):
        return {key: upcast(item) for key, item in value.items()}
    return value


class _Promote(TorchDispatchMode):
    """Runs each op with a requested floating dtype widened to float64; records the ops that still
    produce narrower floating tensors (float8 casts, ``view(dtype)``) or quantize floating values
    to a narrow integer type: float64 cannot stand in for those."""

    def __init__(self) -> None:
        super().__init__()
        self.narrow: dict[str, set[str]] = {}

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in a Dynamo-disabling wrapper unless the mode
        # says no, and that wrapper imports torch._dynamo on its first call: 4-6 s of a reference
        # rank's start-up on a GPU host (2026-11-27, board batch 5), on the critical path of
        # every evaluation. Nothing is ever compiled under this mode, so the wrapper has no job.
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if kwargs.get("dtype") in PROMOTED:
            kwargs["dtype"] = PROMOTED[kwargs["dtype"]]
        out = func(*args, **kwargs)
        source = args[0] if args else None
        quantizes = kwargs.get("dtype") in QUANTIZED and isinstance(source, torch.Tensor) and source.is_floating_point()
        for leaf in tree_leaves(out):
            if not isinstance(leaf, torch.Tensor):
                continue
            narrow_float = (leaf.is_floating_point() or leaf.is_complex()) and leaf.dtype not in WIDE
            if narrow_float or quantizes:
                self.narrow.setdefault(str(leaf.dtype).removeprefix("torch."), set()).add(str(func.__name__))
        return out


@dataclass
class ExactRun:
    outputs: list[torch.Tensor]
    narrow: dict[str, set[str]] = field(default_factory=dict)  # dtype -> ops that produced it
    # The exact interval's ends per output (``Problem.decision_band``); None: no band.
    low: Optional[list[torch.Tensor]] = None
    high: Optional[list[torch.Tensor]] = None

    def widen(self, other: "ExactRun") -> None:
        """Take ``other``, the exact answer with a decision threshold moved, into the interval."""
        for dtype, ops in other.narrow.items():
            self.narrow.setdefault(dtype, set()).update(ops)
        if len(other.outputs) != len(self.outputs):
            raise ValueError(f"a decision-band run returned {len(other.outputs)} outputs, "
                             f"the exact run {len(self.outputs)}")
        low = self.low if self.low is not None else list(self.outputs)
        high = self.high if self.high is not None else list(self.outputs)
        for index, (out, moved) in enumerate(zip(self.outputs, other.outputs)):
            if not isinstance(out, torch.Tensor) or not (out.is_floating_point() and moved.is_floating_point()):
                continue
            if moved.shape != out.shape:
                raise ValueError(f"output {index}: a decision-band run gave shape {tuple(moved.shape)}, "
                                 f"the exact run {tuple(out.shape)}")
            low[index] = torch.minimum(low[index], moved)
            high[index] = torch.maximum(high[index], moved)
        self.low, self.high = low, high

    def why_not(self) -> Optional[str]:
        """Why no output of this run is exact, or None."""
        if not self.narrow:
            return None
        found = "; ".join(f"{dtype} from {', '.join(sorted(ops)[:4])}" for dtype, ops in sorted(self.narrow.items()))
        return f"the reference computes in or quantizes to a narrow dtype even when run in float64 ({found})"


def exact_outputs(call: Callable[..., Any], inputs: dict[str, Any]) -> ExactRun:
    """Run ``call`` on float64 copies of ``inputs``, with float64 as every requested floating dtype."""
    wide_inputs = upcast(inputs)
    default = torch.get_default_dtype()
    mode = _Promote()
    torch.set_default_dtype(torch.float64)
    try:
        with mode:
            result = call(wide_inputs)
    finally:
        torch.set_default_dtype(default)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    return ExactRun(outputs, mode.narrow)


def exact_with_band(call: Callable[..., Any], inputs: dict[str, Any],
                    band: Optional[Callable[[dict[str, Any]], list[dict[str, Any]]]]) -> ExactRun:
    """The exact run, widened by the exact runs at the inputs ``band`` moves a decision
    threshold to (one at a time, so that at most three float64 answers are held)."""
    run = exact_outputs(call, inputs)
    for moved in (band(inputs) if band is not None else []):
        run.widen(exact_outputs(call, moved))
    return run


def warm_up() -> None:
    """The first float64 run imports the torch modules the dispatch mode needs: a rank pays it
    before it reports ready, not in its first trial."""
    exact_outputs(lambda given: given["x"] + 1, {"x": torch.zeros(1)})


def residual_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a residual ``exact - native`` is kept in: the output's own, except float16,
    whose range would flush the small residuals of small values to zero."""
    return torch.float32 if dtype == torch.float16 else dtype


def _residual(exact: torch.Tensor, ref: torch.Tensor, device: Any = "cpu") -> Optional[torch.Tensor]:
    """``exact - ref`` in the residual dtype on ``device`` (the CPU, for a file), 0 where either is
    NaN or Inf; None if it is 0 everywhere."""
    # In float64 the difference of two finite values of a narrower dtype is finite, and it is NaN
    # or infinite wherever either value is: one pass over the difference finds those elements
    # (and zeroes them in place), where two isfinite masks and a where cost three more 8-byte
    # passes (62% of a trial's time at the default size on CPU, scripts/bench/trial_cost.py).
    diff = exact.detach() - ref.detach().to(exact.dtype)
    diff.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    if not bool(diff.any()):
        return None
    return diff.to(residual_dtype(ref.dtype)).to(device).contiguous()


def end_residual(end: torch.Tensor, ref: torch.Tensor, device: Any = "cpu") -> torch.Tensor:
    """A band end as a residual from the native output, infinities kept: a decision that drops
    the token an output reads makes that output -inf (a log-probability), and -inf is then an
    honest answer. Where the native output is not finite, the end's value itself
    (``accuracy.band_end`` reads it back)."""
    native_dtype, end = ref.dtype, end.detach()
    ref = ref.detach().to(end.dtype)
    diff = torch.where(torch.isfinite(ref), end - ref, end)
    return diff.to(residual_dtype(native_dtype)).to(device).contiguous()


def residual_record(native: list[torch.Tensor], run: ExactRun, device: Any = "cpu") -> list[dict[str, Any]]:
    """Per native output: ``{"residual": exact - native or None, "why": None or why no exact}``,
    and where the problem has a decision band, ``"low"`` and ``"high"``: the interval's ends
    as residuals the same way (None where an end is the exact answer everywhere).

    A residual of None with no reason means the native output is exact (or is not floating,
    and is judged by equality). Where either value is NaN or Inf the residual is 0: those
    elements are judged against the native reference, as before. ``device``: where the residuals
    are made (the CPU for a file; the rank's GPU for the judge's slot, whence the judge reads them).
    """
    why_run = run.why_not()
    if len(run.outputs) != len(native):
        why_run = why_run or f"the float64 run returned {len(run.outputs)} outputs, the native {len(native)}"
    records: list[dict[str, Any]] = []
    for index, ref in enumerate(native):
        if not (ref.is_floating_point() or ref.is_complex()):
            records.append({"residual": None, "why": None})
            continue
        why = why_run or _mismatch(ref, run.outputs[index])
        if why is not None:
            records.append({"residual": None, "why": why})
            continue
        exact = run.outputs[index].detach()
        record: dict[str, Any] = {"residual": _residual(exact, ref, device), "why": None}
        if run.low is not None and run.high is not None:
            # An end equal to the exact answer everywhere travels as None, not as a copy.
            for end, values in (("low", run.low[index]), ("high", run.high[index])):
                record[end] = None if torch.equal(values, exact) else end_residual(values, ref, device)
        records.append(record)
    return records


def _mismatch(native: torch.Tensor, exact: Any) -> Optional[str]:
    if not isinstance(exact, torch.Tensor):
        return f"in float64 this output is a {type(exact).__name__}"
    if exact.dtype != PROMOTED.get(native.dtype, native.dtype):
        return f"the reference forces dtype {str(exact.dtype).removeprefix('torch.')} on this output"
    if exact.shape != native.shape:
        return f"in float64 this output has shape {tuple(exact.shape)}, natively {tuple(native.shape)}"
    return None


def save_exact(native: list[torch.Tensor], run: ExactRun, path: Path) -> None:
    torch.save(residual_record(native, run), path)


def exact_path(native_path: Path) -> Path:
    """``task0_trial3_rank1.pt`` -> ``task0_trial3_rank1.exact.pt``."""
    return native_path.with_name(native_path.name.removesuffix(".pt") + ".exact.pt")


def load_exact(path: Path) -> Optional[list[dict[str, Any]]]:
    """The records ``save_exact`` wrote, or None where there are none (then the parent judges
    by the problem's tolerance, and says so)."""
    if not path.exists():
        return None
    records = torch.load(path, weights_only=True, mmap=True)  # written by our reference: mapped, not read
    if not isinstance(records, list):
        raise ValueError(f"{path.name}: not a list of exact-answer records")
    return records


def room_for_exact(resources: ResourceLimits, banded: bool = False) -> ResourceLimits:
    """The reference side's limits: beside outputs as large as the candidate's it writes the
    residuals, each at most twice their size (float16 outputs keep float32 residuals): the exact
    answer's, and with a decision band its two ends."""
    residuals = 3 if banded else 1
    return dataclasses.replace(resources, disk_bytes=(1 + 2 * residuals) * resources.disk_bytes)


# A re-check's exact records travel beside its native outputs in the judge's shared slot (the
# judge outside, evaluator/judge/driver.py ``recheck``): their tensors as more outputs, and their
# shape as a JSON document in one last uint8 tensor. The reference's rank writes it; the judge
# reads it back with every field checked, as it reads any slot.
RECORD_PARTS = ("residual", "low", "high")


def flatten_records(records: list[dict[str, Any]]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``records`` (``residual_record``'s) as their tensors in order and a uint8 tensor holding the
    rest: per record, which parts are tensors (their index among the tensors), absent or None,
    and the reason where there is no exact answer."""
    tensors: list[torch.Tensor] = []
    described: list[dict[str, Any]] = []
    for record in records:
        entry: dict[str, Any] = {"why": record.get("why")}
        for part in RECORD_PARTS:
            if part not in record:
                continue
            value = record[part]
            if isinstance(value, torch.Tensor):
                entry[part] = len(tensors)
                tensors.append(value)
            else:
                entry[part] = None
        described.append(entry)
    meta = torch.frombuffer(bytearray(json.dumps(described).encode()), dtype=torch.uint8)
    return tensors, meta


def split_exact_parts(parts: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
    """A re-check's slot as the rank wrote it (native outputs, the records' tensors, their
    description) back into the native outputs and one record per output; ValueError where it is
    not that (wrong count, an index out of range or used twice, a reason that is not text)."""
    if not parts:
        raise ValueError("a re-check's slot holds nothing")
    try:
        described = json.loads(bytes(parts[-1].to("cpu").numpy().tobytes()).decode())
    except (ValueError, UnicodeDecodeError, RecursionError, TypeError):
        raise ValueError("the exact records' description is not JSON") from None
    if not isinstance(described, list) or len(described) > len(parts) - 1:
        raise ValueError("the exact records' description does not match the outputs")
    native, tensors = parts[:len(described)], parts[len(described):-1]
    used: set[int] = set()
    records: list[dict[str, Any]] = []
    for entry in described:
        if not isinstance(entry, dict) or set(entry) - {"why", *RECORD_PARTS}:
            raise ValueError("an exact record has fields the harness does not write")
        why = entry.get("why")
        if why is not None and not isinstance(why, str):
            raise ValueError("an exact record's reason is not text")
        record: dict[str, Any] = {"why": why}
        for part in RECORD_PARTS:
            if part not in entry:
                continue
            index = entry[part]
            if index is None:
                record[part] = None
                continue
            if type(index) is not int or not 0 <= index < len(tensors) or index in used:
                raise ValueError("an exact record points at no tensor of its own")
            used.add(index)
            record[part] = tensors[index]
        records.append(record)
    if len(used) != len(tensors):
        raise ValueError("tensors beside the exact records that no record names")
    return native, records
