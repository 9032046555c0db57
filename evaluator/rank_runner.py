"""What one rank does for one task: seeded correctness trials, then timing.

Runs inside rank processes. The clocks and event classes are bound at import, before any
candidate code runs, so patching ``time.perf_counter`` or ``torch.cuda.Event`` later changes
nothing here.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

from problems.spec import DTYPE_NAMES, Problem

from .candidate import CandidateError
from .channel import STEP, TIMES, RankChannel
from .exact import exact_outputs, exact_path, save_exact
from .job import CHECKED_COPIES, TaskSpec, call_seed, trial_step
from .report import FailureClass

_perf_counter = time.perf_counter
_CudaEvent = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize
_tensor_equal = torch.equal


@dataclass
class RankContext:
    rank: int
    world_size: int
    device: torch.device
    control_group: Any  # harness-only group: aligns timed regions, carries the stop flag
    channel: RankChannel
    out_dir: Path
    fingerprints_only: bool = False  # reference checks: report hashes, write no output files


def build_groups(problem: Problem, world_size: int, rank: int) -> dict[str, Any]:
    """Create every group of the problem's layout once; return the ones this rank belongs to."""
    groups: dict[str, Any] = {}
    everyone = list(range(world_size))
    for keyword, layout in problem.process_groups(world_size).items():
        for ranks in layout:
            group = dist.group.WORLD if ranks == everyone else dist.new_group(ranks)
            if rank in ranks:
                groups[keyword] = group
    return groups


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _cuda_synchronize(device)


def as_output_list(result: Any, side: str) -> list[torch.Tensor]:
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    for index, item in enumerate(items):
        # Exact type: tensor subclasses (lazy or wrapper tensors) could defer the work.
        if type(item) is not torch.Tensor:
            raise CandidateError(
                FailureClass.SHAPE_MISMATCH,
                f"{side} output {index} is a {type(item).__name__}; outputs must be plain "
                "torch.Tensor objects (a tensor or a tuple of tensors)")
    return items


def _tensor_inputs(inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {name: value for name, value in inputs.items() if isinstance(value, torch.Tensor)}


def save_outputs(outputs: list[torch.Tensor], path: Path) -> None:
    torch.save([t.detach().to("cpu").contiguous() for t in outputs], path)


def fingerprint(t: torch.Tensor) -> dict[str, Any]:
    """Enough to check a reference without moving its outputs: exact bytes, finiteness, shape."""
    data = t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()
    finite = bool(torch.isfinite(t).all()) if t.is_floating_point() else True
    return {"sha256": hashlib.sha256(data).hexdigest(), "finite": finite, "shape": list(t.shape),
            "dtype": str(t.dtype).removeprefix("torch.")}


class TaskRunner:
    def __init__(self, ctx: RankContext, problem: Problem, fn: Callable[..., Any], task: TaskSpec,
                 side: str) -> None:
        self.ctx = ctx
        self.problem = problem
        self.fn = fn
        self.task = task
        self.side = side
        self.dtype = DTYPE_NAMES[task["dtype"]]
        self.groups = build_groups(problem, ctx.world_size, ctx.rank)

    def inputs(self, seed: int) -> dict[str, Any]:
        case = self.problem.case(self.ctx.world_size, self.task["size"], self.dtype,
                                 rank=self.ctx.rank, seed=seed, device=self.ctx.device)
        return self.problem.make_inputs(case)

    def call(self, inputs: dict[str, Any]) -> Any:
        return self.fn(**inputs, **self.groups)

    def align(self) -> None:
        dist.barrier(group=self.ctx.control_group)
        synchronize(self.ctx.device)

    def run(self) -> None:
        for trial in self.task["trials"]:
            self.run_trial(trial["index"], trial["seed"], trial_step(trial))
        if self.task.get("timing"):
            self.run_timing(self.task["timing"], self.task["timing_seed"])

    def run_trial(self, index: int, seed: int, step: str) -> None:
        inputs = self.inputs(seed)
        before = {name: t.clone() for name, t in _tensor_inputs(inputs).items()
                  if name not in self.problem.may_overwrite}
        # The reference's exact answer, from float64 copies of these inputs, before anything
        # can overwrite them (evaluator/exact.py).
        exact = exact_outputs(self.call, inputs) if self.side == "reference" and not self.ctx.fingerprints_only else None
        self.align()
        outputs = as_output_list(self.call(inputs), self.side)
        synchronize(self.ctx.device)
        for name, original in before.items():
            if not _tensor_equal(original, inputs[name]):
                raise CandidateError(
                    FailureClass.INPUT_MUTATION,
                    f"input `{name}` was modified in trial {index}; only "
                    f"{list(self.problem.may_overwrite) or 'no inputs'} may be overwritten")
        if self.ctx.fingerprints_only:
            self.ctx.channel.send(STEP, task=self.task["task"], step=step,
                                  fingerprints=[fingerprint(t) for t in outputs])
            return
        path = self.ctx.out_dir / f"task{self.task['task']}_trial{index}_rank{self.ctx.rank}.pt"
        save_outputs(outputs, path)
        if exact is not None:
            save_exact(outputs, exact, exact_path(path))
        self.ctx.channel.send(STEP, task=self.task["task"], step=step)

    def copy_count(self, inputs: dict[str, Any], cfg: dict[str, Any]) -> int:
        """Input sets in rotation: enough that no call finds its inputs in L2."""
        nbytes = sum(t.numel() * t.element_size() for t in _tensor_inputs(inputs).values())
        if self.ctx.device.type == "cuda":
            l2 = torch.cuda.get_device_properties(self.ctx.device).L2_cache_size
            wanted = math.ceil(cfg["l2_multiple"] * l2 / max(nbytes, 1)) + 1
        else:
            wanted = 2
        return max(2, min(cfg["max_copies"], wanted, max(1, cfg["max_copy_bytes"] // max(nbytes, 1))))

    def run_timing(self, cfg: dict[str, Any], seed: int) -> None:
        """Timed call n gets inputs of its own (seed ``call_seed(seed, n)``), generated outside the
        timed region into the slot of the call before it in the rotation; no cache, keyed on
        values or on addresses, is right for a later call. The outputs of the latest call in each
        of the first CHECKED_COPIES slots are kept, named by call, for the parent to check."""
        ctx = self.ctx
        ctx.channel.send(STEP, task=self.task["task"], step="timing started", timing=True)
        first = self.inputs(call_seed(seed, -1))
        copies = [first] + [self.inputs(call_seed(seed, -1 - k)) for k in range(1, self.copy_count(first, cfg))]
        flag = torch.zeros(1, device=ctx.device if ctx.device.type == "cuda" else "cpu")

        def agreed_stop(stop: bool) -> bool:
            # Rank 0 decides for everyone, and the all-reduce that carries its decision also
            # aligns the ranks: every rank makes exactly the same number of calls.
            flag.fill_(1.0 if (stop and ctx.rank == 0) else 0.0)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=ctx.control_group)
            synchronize(ctx.device)
            return flag.item() > 0

        warm_start = _perf_counter()
        warmup = 0
        while not agreed_stop(warmup >= 10 * cfg["warmup_iterations"] + 50 or (
                warmup >= cfg["warmup_iterations"] and _perf_counter() - warm_start >= cfg["warmup_time_s"])):
            self.call(copies[warmup % len(copies)])
            warmup += 1
        count = len(copies)
        copies.clear()  # free the warm-up sets before making the timed ones
        copies.extend(self.inputs(call_seed(seed, n)) for n in range(count))
        synchronize(ctx.device)
        times: list[float] = []
        gaps: list[float] = []
        started = _perf_counter()
        checked: dict[int, tuple[int, list[torch.Tensor]]] = {}  # slot -> (call, its outputs, cloned)
        while True:
            elapsed = _perf_counter() - started
            n = len(times)
            if agreed_stop(n >= cfg["max_iterations"] or elapsed >= cfg["max_time_s"] or (
                    n >= cfg["min_iterations"] and elapsed >= cfg["min_time_s"])):
                break
            inputs = copies[n % count]
            if ctx.device.type == "cuda":
                start, end, after_sync = _CudaEvent(enable_timing=True), _CudaEvent(enable_timing=True), _CudaEvent(enable_timing=True)
                start.record()
                result = self.call(inputs)
                end.record()
                _cuda_synchronize(ctx.device)
                after_sync.record()
                after_sync.synchronize()
                times.append(start.elapsed_time(end))
                gaps.append(end.elapsed_time(after_sync))
            else:
                call_start = _perf_counter()
                result = self.call(inputs)
                times.append((_perf_counter() - call_start) * 1e3)
                gaps.append(0.0)
            outputs = as_output_list(result, self.side)
            if n % count < CHECKED_COPIES:
                # Cloned: a candidate may return a buffer it reuses.
                checked[n % count] = (n, [t.detach().clone() for t in outputs])
            copies[n % count] = self.inputs(call_seed(seed, n + count))
        if not ctx.fingerprints_only:
            for call, kept in checked.values():
                save_outputs(kept, ctx.out_dir / f"task{self.task['task']}_timed{call}_rank{ctx.rank}.pt")
        ctx.channel.send(TIMES, task=self.task["task"], times_ms=times, gap_ms=gaps,
                         copies=len(copies), warmup=warmup)
