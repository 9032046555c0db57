"""The job the evaluating parent hands one side's rank processes (as JSON in the side's inbox).

Built by ``api.Evaluation.job`` (or ``suite`` for reference-only runs), given box paths by the
launcher, read by ``rank_main`` and ``rank_runner``. The agreements both ends rely on (which timed
calls are kept, their seeds, how a trial is named in progress) live here too.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, TypedDict

# Timed calls whose outputs are re-checked: the latest call in each of CHECKED_COPIES slots of the
# input rotation, slots the parent draws in secret when timing ends. The candidate keeps every
# slot's latest outputs, so any timed call may turn out to be one of them.
CHECKED_COPIES = 4
# Where the judge outside the ranks draws the checked calls (evaluator/judge/driver.py): how many,
# drawn uniformly from all counted timed calls. A candidate that does the work on a fraction f of
# them passes with probability at most f ** CHECKED_CALLS (0.9 ** 64 = 0.0012).
CHECKED_CALLS = 64


class TrialSpec(TypedDict, total=False):
    index: int
    seed: int
    label: str  # how the rank names it in its progress ("recheck of timed call 12"); default "trial N"


class TaskSpec(TypedDict):
    task: int
    problem: str  # slug
    size: str
    dtype: str
    trials: list[TrialSpec]
    timing: Optional[dict[str, Any]]  # TimingConfig as a dict, or None: no timed phase
    timing_seed: int


class RankJob(TypedDict, total=False):
    side: Literal["candidate", "reference"]
    world_size: int
    device: Literal["cpu", "cuda"]
    backend: Literal["gloo", "nccl"]
    solution_path: Optional[str]  # the candidate's file (inside the box); None for the reference
    out_dir: str  # where outputs land: the parent's folder; the launcher points ranks at their box's
    store_path: str  # the FileStore, set by the launcher inside the box
    tasks: list[TaskSpec]
    threads: int
    collective_timeout_s: float
    outputs: Literal["files", "fingerprints"]  # fingerprints: hashes on the status channel only
    affinity: dict[str, list[int]]  # rank -> CPU cores it runs on (those local to its GPU)
    driven: bool  # the parent drives the timed phase over a command pipe (evaluations)


def trial_step(trial: TrialSpec) -> str:
    """How a rank names a trial in its progress: ``trial 3``, or what it rechecks."""
    return str(trial.get("label") or f"trial {trial['index']}")


def call_seed(timing_seed: int, call: int) -> int:
    """The seed of timed call ``call``'s inputs (negative: warm-up sets); the parent gives the
    reference these seeds to recompute the calls whose outputs it checks."""
    return (timing_seed + 1_000_003 * (call + 1)) % 2**31
