"""What one evaluation is asked to do, and the limits that keep a bad candidate from hanging it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

Device = Literal["cpu", "cuda"]

# The fewest alternating rounds that can give a 95% interval of their median at all. Without
# assuming a distribution, n rounds all fall on one side of the true median with probability
# 2 * 0.5**n: 6.3% for 5 rounds, 3.1% for 6, so only from 6 rounds do even the lowest and the
# highest of them bracket the median 95% of the time. From fewer, the bootstrap's "interval" is
# the rounds' own spread (one round: the value itself) and says nothing of 95%: reports still
# carry it, but what shows a report (``pkb eval``, ``pkb sweep``, the portal) says "no interval"
# instead of printing it as one.
MIN_INTERVAL_ROUNDS = 6


@dataclass(frozen=True)
class Limits:
    """Seconds a rank may go without progress before every rank is killed.

    ``startup_s`` covers process start, process-group set-up, importing the candidate and its
    CUDA builds (a cold nvcc build of a torch extension takes ~40 s on a small host). ``step_s``
    covers one correctness trial or one timed phase. ``total_s`` bounds a whole side.
    ``build_s`` replaces the others while a rank says it is compiling (evaluator/builds.py):
    a build inside the first call is not held to the per-step limit.
    """

    startup_s: float = 240.0
    step_s: float = 60.0
    build_s: float = 600.0
    total_s: float = 900.0
    kill_grace_s: float = 2.0  # between SIGTERM and SIGKILL
    error_grace_s: float = 3.0  # after a first rank reports an error, to collect the others'


@dataclass(frozen=True)
class ResourceLimits:
    """What one side's sandbox may use; reaching a limit ends the side as ``resource_limit``.

    ``disk_bytes`` bounds one memory-backed filesystem that holds the side's work directory,
    ``/tmp``, ``/dev/shm`` and home together. ``memory_bytes_per_rank`` is host memory (resident
    set of the rank and everything it started); CPU ranks also get it as their address-space limit,
    so a huge allocation fails at once. GPU memory is bounded by the device, not here.
    """

    # Processes and threads of a rank and its children. A CUDA rank runs 30-60 threads and a
    # torch extension build a few processes per job (MAX_JOBS=4); a fork bomb's busy processes,
    # bounded by this, are what the host has to carry until the side is killed.
    tasks_per_rank: int = 256
    open_files: int = 4096
    disk_bytes: int = 8 * 2**30
    memory_bytes_per_rank: int = 64 * 2**30


@dataclass(frozen=True)
class TimingConfig:
    """How the timed phase runs.

    In an evaluation the parent drives both sides at once (evaluator/paired.py): warm-up blocks
    until each side has run ``warmup_iterations`` calls and ``warmup_time_s`` seconds, then
    rounds of one block per side (about ``block_time_s`` each, in ABBA order) until the 95%
    interval of the median per-round speedup is within ``target_half_width`` of it (after at
    least ``min_rounds``), or ``max_rounds``, or ``max_time_s`` of rounds. The iteration fields
    are for reference-only suite runs, which time themselves.
    """

    warmup_iterations: int = 5
    warmup_time_s: float = 0.3
    block_time_s: float = 0.025
    min_block_calls: int = 3
    max_block_calls: int = 200
    min_rounds: int = MIN_INTERVAL_ROUNDS
    max_rounds: int = 200
    target_half_width: float = 0.01
    max_time_s: float = 8.0
    min_iterations: int = 10
    max_iterations: int = 200
    min_time_s: float = 1.0
    l2_multiple: float = 3.0  # rotated input copies span at least this many L2 caches
    max_copies: int = 16
    max_copy_bytes: int = 8 * 2**30
    # GPUs, the in-rank judge: how the ranks meet before each timed call. "host": a barrier on the
    # harness's gloo group and a synchronize (the ranks leave the barrier tens of microseconds
    # apart, and a collective's window on the early rank includes waiting for the late one).
    # "device": the same, then a one-element all-reduce queued on the GPU just before the start
    # event, so every GPU's window opens when the ranks have met there. Being measured
    # (docs/timing.md); reports say which ran (timing.align).
    gpu_align: str = "host"

    @classmethod
    def quick(cls) -> "TimingConfig":
        """For CPU runs: short, labelled CPU in the report.

        gloo ranks that wait sleep until the next scheduler tick, so single calls on a small
        host take either ~0.3 ms or ~4 ms: blocks of many calls, and a cap on the rounds.
        """
        return cls(warmup_iterations=3, warmup_time_s=0.05, block_time_s=0.03, min_block_calls=10,
                   min_rounds=MIN_INTERVAL_ROUNDS, max_rounds=60, max_time_s=1.5, min_iterations=30,
                   max_iterations=200, min_time_s=0.3, max_copies=2)


@dataclass(frozen=True)
class EvalConfig:
    problem: str
    solution_path: Path
    world_size: int
    device: Device = "cpu"
    dtype: Optional[str] = None  # None: the problem's default dtype
    size: str = "default"
    trials: int = 5
    seed: Optional[int] = None  # base seed of the trial seeds; None draws a fresh secret one
    timing: bool = True
    timing_config: Optional[TimingConfig] = None  # None: quick on CPU, full on CUDA
    hardware_profile: Optional[str] = None  # None: the committed profile matching the device
    limits: Limits = field(default_factory=Limits)
    resources: ResourceLimits = field(default_factory=ResourceLimits)
    sandbox: bool = True  # False runs candidate code unconfined (the report says so)
    # GPUs only: "outside" runs the judge outside the ranks as on CPU (docs/judge.md; being
    # measured); "ranks" keeps the in-rank judge.
    gpu_judge: str = "ranks"
    # CPU only: "outside" (the default; the portal's workers never ask for another) or "ranks",
    # the judge GPUs run by default, here so that the suite can cover that path on machines with
    # no GPU; the report's timing.method says which judge ran.
    cpu_judge: str = "outside"
    # The judge outside: "call" releases a block's inputs one call at a time (no block can be
    # batched; a round trip per call); "block" releases them all before the block (no round trip;
    # a candidate may batch the block). docs/judge.md weighs the two; "call" is the default.
    judge_release: str = "call"
    gpu_align: str = "host"  # TimingConfig.gpu_align for GPU runs judged in the ranks
    # GPUs only, a test of the GPU path's mechanisms on a host with one GPU: every rank on GPU 0,
    # collectives over gloo (NCCL refuses two ranks on one GPU). Its times measure nothing (both
    # sides' ranks take turns on one GPU and talk through host memory); no worker asks for it.
    share_gpu: bool = False
    # Seconds the whole evaluation may take (a worker's deadline, inside its own kill); each side's
    # limit is cut to fit, so that running long ends in a diagnosis, not a kill from outside.
    deadline_s: Optional[float] = None
    workdir: Optional[Path] = None  # None: a fresh temporary directory, removed afterwards

    @property
    def backend(self) -> str:
        return "nccl" if self.device == "cuda" and not self.share_gpu else "gloo"

    @property
    def gpus_needed(self) -> int:
        return 0 if self.device == "cpu" else 1 if self.share_gpu else self.world_size

    def rank_gpu(self, rank: int) -> int:
        """The index of rank ``rank``'s GPU (of those visible)."""
        return 0 if self.share_gpu else rank

    def rank_device(self, rank: int) -> str:
        return "cpu" if self.device == "cpu" else f"cuda:{self.rank_gpu(rank)}"

    def resolved_timing(self) -> TimingConfig:
        if self.timing_config is not None:
            return self.timing_config
        if self.device == "cuda":
            return TimingConfig(gpu_align=self.gpu_align)
        return TimingConfig.quick()

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["solution_path"] = str(self.solution_path)
        data["workdir"] = str(self.workdir) if self.workdir else None
        return data
