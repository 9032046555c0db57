"""What one rank does for one task: seeded correctness trials and timing.

In an evaluation (a parent drives the timed phase, see rank_timing.py) the candidate runs its
trials, then answers the parent's timing commands; the reference answers them first and runs
its trials (and the re-checks of the candidate's timed calls) only at ``finish``, once the
candidate's ranks are gone. Reference-only suite runs do trials, then time themselves.

Runs inside rank processes. The clocks and event classes are bound at import, before any
candidate code runs, so patching ``time.perf_counter`` or ``torch.cuda.Event`` later changes
nothing here.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

from problems.spec import DTYPE_NAMES, Problem, secret_seed

from .background_saves import BackgroundSaves
from .candidate import CandidateError
from .channel import STEP, TIMES, RankChannel
from .exact import exact_path, exact_with_band, flatten_records, residual_record, save_exact
from .job import TaskSpec, TrialSpec, trial_step
from .rank_timing import CommandReader, TimingSession, kept_outputs, serve
from .report import FailureClass

_perf_counter = time.perf_counter
_CudaEvent = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize
_all_reduce = dist.all_reduce  # the GPU meeting point (timed_call): bound before candidate code runs
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
    commands: Optional[CommandReader] = None  # the parent drives the timed phase (evaluations)
    salt: str = ""  # this rank's secret, mixed into its own inputs (reference ranks only)
    # Mixed into every seed (problems/spec.py secret_seed) where the ranks make their inputs: a
    # problem's shared streams take no salt, and the public seeds are in the job.
    seed_secret: str = ""
    buffers: Any = None  # the judge's shared buffers (shim/buffers.py): inputs come from the judge


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
        self._meeting_point: Optional[torch.Tensor] = None  # device_meeting_point()
        # The reference's files, written beside its next trial on GPUs (background_saves.py);
        # None: each written before the trial reports its step.
        self._saves = BackgroundSaves(initializer=lambda: torch.cuda.set_device(ctx.device)) \
            if side == "reference" and ctx.device.type == "cuda" else None

    def inputs(self, seed: int) -> dict[str, Any]:
        case = self.problem.case(self.ctx.world_size, self.task["size"], self.dtype, rank=self.ctx.rank,
                                 seed=secret_seed(seed, self.ctx.seed_secret), device=self.ctx.device,
                                 salt=self.ctx.salt)
        return self.problem.make_inputs(case)

    def call(self, inputs: dict[str, Any]) -> Any:
        return self.fn(**inputs, **self.groups)

    def device_meeting_point(self) -> torch.Tensor:
        """The one element the ranks all-reduce on the GPU before a timed call (made once)."""
        if self._meeting_point is None:
            self._meeting_point = torch.zeros(1, device=self.ctx.device)
        return self._meeting_point

    def align(self) -> None:
        dist.barrier(group=self.ctx.control_group)
        synchronize(self.ctx.device)

    def run(self) -> None:
        timing = self.task.get("timing")
        if self.ctx.buffers is not None:
            self.run_judged()
            return
        if timing and self.ctx.commands is not None:
            self.run_driven(timing)
            return
        self.run_trials(self.task["trials"])
        if timing:
            self.run_timing(timing, self.task["timing_seed"])

    def run_trials(self, trials: list[TrialSpec]) -> None:
        """Each trial run and its files written, before this returns."""
        try:
            for trial in trials:
                self.run_trial(trial["index"], trial["seed"], trial_step(trial))
        except BaseException:
            if self._saves is not None:
                self._saves.drain(quietly=True)  # the trial's own error is the one to report
            raise
        if self._saves is not None:
            self._saves.drain()

    def run_judged(self) -> None:
        """Calls as the judge sends them (evaluator/shim/calls.py); the reference's own trials and
        re-checks of the candidate's checked calls come at ``finish``, once the candidate is gone."""
        from .shim.calls import serve_calls

        def finish(command: dict[str, Any]) -> None:
            # Re-checked through the judge's slots (``exact_parts``), the reference writes no files.
            if self.side == "reference" and not command.get("rechecked"):
                self.run_trials(self.task["trials"] + list(command.get("rechecks", [])))

        serve_calls(self, self.ctx.buffers, self.ctx.commands, finish,
                    as_outputs=lambda result: as_output_list(result, self.side),
                    synchronize=lambda: synchronize(self.ctx.device))

    def run_driven(self, cfg: dict[str, Any]) -> None:
        assert self.ctx.commands is not None
        seed = self.task["timing_seed"]
        if self.side == "candidate":
            self.run_trials(self.task["trials"])
            serve(self, cfg, seed, self.ctx.commands, self.save_kept, keep_outputs=True)
        else:
            # Trials last: the reference's outputs never exist while candidate code runs.
            # It keeps its outputs as the candidate does (and drops them): the same harness work
            # per call on both sides, so that our wall clock can check what the ranks report.
            serve(self, cfg, seed, self.ctx.commands, self.finish_reference, keep_outputs=True)

    def finish_reference(self, session: TimingSession, command: dict[str, Any]) -> None:
        session.kept.clear()
        self.run_trials(self.task["trials"] + list(command.get("rechecks", [])))

    def save_kept(self, session: TimingSession, command: dict[str, Any]) -> None:
        """The outputs of the timed calls the parent chose, named by call."""
        for call, outputs in kept_outputs(session, [int(s) for s in command.get("keep", [])]):
            save_outputs(outputs, self.ctx.out_dir / f"task{self.task['task']}_timed{call}_rank{self.ctx.rank}.pt")

    def run_trial(self, index: int, seed: int, step: str) -> None:
        inputs = self.inputs(seed)
        before = {name: t.clone() for name, t in _tensor_inputs(inputs).items()
                  if name not in self.problem.may_overwrite}
        # The reference's exact answer, from float64 copies of these inputs, before anything
        # can overwrite them (evaluator/exact.py), widened where a decision is within rounding.
        exact = exact_with_band(self.call, inputs, self.problem.decision_band) \
            if self.side == "reference" and not self.ctx.fingerprints_only else None
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

        def save() -> None:
            save_outputs(outputs, path)
            if exact is not None:
                save_exact(outputs, exact, exact_path(path))

        if self._saves is not None:
            self._saves.submit(save)  # read by the judge only once the side is done (run_trials drains)
        else:
            save()
        self.ctx.channel.send(STEP, task=self.task["task"], step=step)

    def exact_parts(self, inputs: dict[str, Any]) -> list[torch.Tensor]:
        """A re-check the judge released (``shim/calls.py``, call marked ``exact``): the native
        outputs, then the exact records' tensors, then their description (``exact.flatten_records``),
        computed as ``run_trial`` computes them, on the judge's own inputs. The reference's only."""
        if self.side != "reference":
            raise SystemExit("only the reference's ranks recompute exact answers")
        exact = exact_with_band(self.call, inputs, self.problem.decision_band)  # before the call can overwrite them
        outputs = as_output_list(self.call(inputs), self.side)
        synchronize(self.ctx.device)
        parts, meta = flatten_records(residual_record(outputs, exact, device=self.ctx.device))
        return outputs + parts + [meta]

    def tensor_bytes(self, inputs: dict[str, Any]) -> int:
        return sum(t.numel() * t.element_size() for t in _tensor_inputs(inputs).values())

    def timed_call(self, inputs: dict[str, Any], device_align: bool = False) -> tuple[float, float, list[torch.Tensor]]:
        """One call, ranks aligned first: (its time in ms, GPU work left after it returned in ms,
        its outputs). The gap is the time from the timed stream's end event to a device-wide
        synchronize: work the solution left running on a side stream shows up there.
        ``device_align`` (TimingConfig.gpu_align "device"): the ranks also meet on the GPU, in a
        one-element all-reduce queued before the start event, so that the window opens on every
        GPU once all have arrived, not when this rank left the host barrier."""
        self.align()
        if self.ctx.device.type == "cuda":
            start, end, after_sync = (_CudaEvent(enable_timing=True) for _ in range(3))
            if device_align:
                _all_reduce(self.device_meeting_point())
            start.record()
            result = self.call(inputs)
            end.record()
            _cuda_synchronize(self.ctx.device)
            after_sync.record()
            after_sync.synchronize()
            elapsed, gap = start.elapsed_time(end), end.elapsed_time(after_sync)
        else:
            call_start = _perf_counter()
            result = self.call(inputs)
            elapsed, gap = (_perf_counter() - call_start) * 1e3, 0.0
        return elapsed, gap, as_output_list(result, self.side)

    def run_timing(self, cfg: dict[str, Any], seed: int) -> None:
        """Timing on its own (reference-only suite runs, no parent in the loop): rank 0 decides
        when to stop from its own clock, and the all-reduce that carries its decision makes
        every rank run the same number of calls. Candidates are never timed this way."""
        ctx = self.ctx
        ctx.channel.send(STEP, task=self.task["task"], step="timing started", timing=True)
        session = TimingSession(self, cfg, seed, keep_outputs=False)
        flag = torch.zeros(1, device=ctx.device)

        def agreed_stop(stop: bool) -> bool:
            flag.fill_(1.0 if (stop and ctx.rank == 0) else 0.0)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=ctx.control_group)
            return flag.item() > 0

        warm_start = _perf_counter()
        while not agreed_stop(session.calls >= cfg["warmup_iterations"]
                              and _perf_counter() - warm_start >= cfg["warmup_time_s"]):
            session.block(1)
        warmup = session.calls
        times: list[float] = []
        gaps: list[float] = []
        started = _perf_counter()
        while not agreed_stop(len(times) >= cfg["max_iterations"] or _perf_counter() - started >= cfg["max_time_s"]
                              or (len(times) >= cfg["min_iterations"] and _perf_counter() - started >= cfg["min_time_s"])):
            elapsed, gap, _ = session.block(1)
            times += elapsed
            gaps += gap
        ctx.channel.send(TIMES, task=self.task["task"], times_ms=times, gap_ms=gaps,
                         copies=session.count, warmup=warmup)
