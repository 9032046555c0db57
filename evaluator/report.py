"""The evaluation report: one versioned JSON document per evaluation.

The portal stores it as it is, so every change to its shape bumps ``SCHEMA_VERSION`` and is
recorded in docs/report-schema.md; ``evaluator/report.schema.json`` is the machine-checkable form.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Literal, Mapping, NotRequired, Optional, TypedDict

SCHEMA_VERSION = "1.5"


class FailureClass(str, enum.Enum):
    SYNTAX_ERROR = "syntax_error"  # the file does not parse
    IMPORT_ERROR = "import_error"  # importing the module raised
    MISSING_SOLUTION = "missing_solution"  # no callable named `solution`
    SIGNATURE_MISMATCH = "signature_mismatch"  # cannot be called with the reference's arguments
    COMPILE_ERROR = "compile_error"  # a CUDA/C++ build through evaluator.cuda failed
    RUNTIME_ERROR = "runtime_error"  # solution raised while running
    SHAPE_MISMATCH = "shape_mismatch"  # wrong output count or shape
    DTYPE_MISMATCH = "dtype_mismatch"
    NAN_INF = "nan_inf"  # NaN or Inf where the reference has finite values
    VALUE_MISMATCH = "value_mismatch"  # outside the problem's tolerance
    INPUT_MUTATION = "input_mutation"  # changed an input the real code leaves alone
    TIMING_VIOLATION = "timing_violation"  # GPU work escaped the timed region
    PROTOCOL_VIOLATION = "protocol_violation"  # interfered with the harness: outputs missing or changed
    DEADLOCK = "deadlock"  # a rank made no progress within the limit (deadlock or timeout)
    CRASH = "crash"  # a rank process died (signal, abort, os._exit)
    OUT_OF_MEMORY = "out_of_memory"
    RESOURCE_LIMIT = "resource_limit"  # reached a sandbox limit: processes, disk, host memory
    HARNESS_ERROR = "harness_error"  # our fault: the reference side or the evaluator failed


Verdict = Literal["pass", "fail"]


class ErrorNorms(TypedDict):
    max_abs: float  # largest absolute error over the finite elements
    rms: float  # root mean square of the absolute error over the finite elements


class OutputCheck(TypedDict):
    index: int
    status: str  # "ok" or a FailureClass value
    shape: list[int]
    expected_shape: list[int]
    dtype: str
    expected_dtype: str
    max_abs_err: Optional[float]  # against what the output was judged against
    max_rel_err: Optional[float]
    mismatched: int  # elements outside the allowed error (or tolerance)
    numel: int
    # 1.3: how the output was judged (docs/evaluator.md, "How correctness is judged").
    judged_against: Literal["exact", "reference"]
    candidate_err: Optional[ErrorNorms]  # against the exact answer
    reference_err: Optional[ErrorNorms]  # the reference's own, against the exact answer
    allowed_err: Optional[ErrorNorms]  # the bounds the candidate's errors had to stay within
    rule: Optional[dict[str, float]]  # rms_multiple, max_multiple, ulp_allowance[, decision_band_elements]; or atol, rtol
    no_exact_answer: Optional[str]  # why a floating output was judged against the reference


class RankCheck(TypedDict):
    rank: int
    passed: bool
    outputs: list[OutputCheck]


class Trial(TypedDict):
    index: int
    seed: int
    kind: Literal["correctness", "timed"]  # "timed": outputs of a timed iteration, re-checked
    passed: bool
    ranks: list[RankCheck]


class Failure(TypedDict):
    failure_class: str  # a FailureClass value
    message: str  # one line a person can act on
    rank: Optional[int]
    trial: Optional[int]
    output: Optional[int]
    traceback: Optional[str]
    compiler_output: Optional[str]
    stacks: dict[str, str]  # rank -> Python stacks of every thread, for deadlocks
    stderr: dict[str, str]  # rank -> tail of its stderr


# What a report keeps of a failure's text, in bytes of its JSON (every character outside ASCII
# escaped, as `pkb eval` writes reports): the message, the traceback and the compiler's output each,
# and every rank's stacks and stderr tails together. A rank's words come from its process, where
# candidate code can forge them: one error message of 260,000 characters outside the Basic
# Multilingual Plane fits the status channel's 1 MiB line (4 bytes each) and became 3.1 MB of report
# (12 bytes each, "\ud83d\ude00"), past the 2.5 MB the portal reads of a request: the worker's post
# was refused and the evaluation left with no verdict (red team, reports_an_oversized_failure).
FAILURE_TEXT_BYTES = {"message": 8 << 10, "traceback": 32 << 10, "compiler_output": 32 << 10,
                      "stacks": 64 << 10, "stderr": 32 << 10}


def fitted_text(text: str, limit: int, keep: str = "head") -> str:
    """``text`` cut to at most ``limit`` bytes of JSON (ASCII-escaped), its start (``head``) or its
    end (``tail``: a traceback's and a compiler's last lines say what went wrong) kept, and a note
    of what was cut."""
    def size(part: str) -> int:
        return len(json.dumps(part)) - 2

    if size(text) <= limit:
        return text
    note = f" [... {{}} characters cut: the report keeps {limit} bytes of this text]"
    room = max(0, limit - size(note.format(len(text))))
    kept = len(text) if room >= len(text) else room  # no character takes less than a byte
    while kept and size(text[:kept] if keep == "head" else text[-kept:]) > room:
        kept = kept * room // max(size(text[:kept] if keep == "head" else text[-kept:]), 1)
    part = text[:kept] if keep == "head" else text[len(text) - kept:]
    cut = note.format(len(text) - kept)
    return part + cut if keep == "head" else cut.strip() + " " + part


def bounded_failure(failure: Optional["Failure"],
                    limits: Mapping[str, int] = FAILURE_TEXT_BYTES) -> Optional["Failure"]:
    """``failure`` with its text within ``limits`` (FAILURE_TEXT_BYTES; a sweep's abridged reports
    keep less); the verdict and class are untouched."""
    if failure is None:
        return None
    bounded = dict(failure)
    if isinstance(bounded.get("message"), str):
        bounded["message"] = fitted_text(bounded["message"], limits["message"])
    for key in ("traceback", "compiler_output"):
        if isinstance(bounded.get(key), str):
            bounded[key] = fitted_text(bounded[key], limits[key], keep="tail")
    for key in ("stacks", "stderr"):
        texts = bounded.get(key)
        if isinstance(texts, dict) and texts:
            share = limits[key] // len(texts)
            bounded[key] = {rank: fitted_text(text, share, keep="tail") if isinstance(text, str) else text
                            for rank, text in texts.items()}
    return bounded  # type: ignore[return-value]


def make_failure(failure_class: FailureClass, message: str, **extra: Any) -> Failure:
    """A Failure with every field present; ``extra`` fills rank, trial, traceback, stacks, ..."""
    failure = Failure(failure_class=failure_class.value, message=message, rank=None, trial=None,
                      output=None, traceback=None, compiler_output=None, stacks={}, stderr={})
    failure.update(extra)  # type: ignore[typeddict-item]
    return failure


class SideTiming(TypedDict):
    median_ms: float
    mean_ms: float
    min_ms: float
    p10_ms: float
    p90_ms: float
    iterations: int
    per_rank_median_ms: list[float]
    roofline_fraction: Optional[float]


class Roofline(TypedDict):
    time_ms: float
    bound: Literal["link", "hbm", "flops"]
    link_bytes: float
    hbm_bytes: float
    flops: float
    link_bandwidth_gbps: float
    hbm_bandwidth_gbps: float
    flops_rate_tflops: float


class Interval(TypedDict):
    low: float
    high: float
    level: float  # 0.95
    method: str


class Round(TypedDict):
    candidate_ms: float  # the block's median over calls of the slowest rank's time
    reference_ms: float
    ratio: float  # reference_ms / candidate_ms


class Stop(TypedDict):
    reason: Literal["converged", "time_cap", "round_cap"]
    rounds: int
    seconds: float  # spent in rounds (warm-up excluded)
    half_width: float  # of the interval, as a share of the speedup
    target_half_width: float


class Timing(TypedDict):
    device: Literal["cuda", "cpu"]  # CPU timings are never compared with GPU ones
    method: str
    input_copies: int
    warmup_iterations: int  # the candidate's warm-up calls
    reference: SideTiming  # pooled over every round's block
    candidate: SideTiming
    speedup: float  # the median of the per-round ratios (1.3; before: ratio of the two medians)
    roofline: Optional[Roofline]
    interval: Interval  # from 1.3 on
    rounds: list[Round]
    block_calls: dict[str, int]  # calls per block: {"candidate": n, "reference": m}
    stop: Stop
    clocks: Optional[dict[str, Any]]  # GPU clocks before and after the rounds; None on CPU
    pinning: Optional[dict[str, list[int]]]  # rank -> CPU cores (both sides alike); None: not pinned
    unaccounted_ms: dict[str, float]  # per call, the parent's wall time the ranks' times leave out
    checks: NotRequired["Checks"]  # 1.4: which timed calls the judge checked, and what that bounds
    align: NotRequired[Literal["host", "device"]]  # GPU, in-rank judge: how ranks met before each call


class Checks(TypedDict):
    timed_calls: int  # counted timed calls of the candidate
    checked: int  # of them, drawn uniformly after they returned; their outputs judged like trials
    judge: str  # "outside" (the judge's buffers, clock and copies) or "in-rank" (GPU, digests)
    pass_bound: dict[str, float]  # honest fraction f -> the most a candidate honest on f passes with


class ProblemRef(TypedDict):
    slug: str
    id: int
    version: str


class SettingInfo(TypedDict):
    world_size: int
    size: str
    dtype: str
    device: Literal["cuda", "cpu"]
    backend: Literal["nccl", "gloo"]
    trials: int


class SolutionInfo(TypedDict):
    sha256: str
    bytes: int


class WallTime(TypedDict):
    total_s: float
    reference_s: float
    candidate_s: float
    compile_s: Optional[float]  # the slowest rank's time in builds, failed ones too (evaluator/builds.py)
    # The judge outside the ranks: seconds of each of its phases, in order (start, trials, timing,
    # finish, comparison), so that a slow evaluation says where its wall time went.
    phases_s: NotRequired[dict[str, float]]


class Report(TypedDict):
    schema_version: str
    evaluator_version: str
    problem: ProblemRef
    setting: SettingInfo
    solution: SolutionInfo
    verdict: Verdict
    failure: Optional[Failure]
    trials: list[Trial]
    timing: Optional[Timing]
    hardware_profile: Optional[str]  # id of the hardware profile used for the roofline
    sandbox: Literal["on", "off"]  # "off": candidate code ran unconfined (an operator's choice)
    software: dict[str, str]
    wall_time: WallTime
    started_at: str  # ISO 8601, UTC
    finished_at: str
