"""The timing part of a report, from what paired timing measured (paired.py): both sides'
pooled call times, the speedup and its interval, the roofline fractions, and the two checks of
what the ranks reported: GPU work escaping the timed events, and call times our own clock denies.
"""

from __future__ import annotations

from typing import Any, Optional

from .paired import RESAMPLES, PairedTiming, SideBlocks, side_iterations, unaccounted_ms
from .report import Failure, FailureClass, Roofline, SideTiming, Timing, make_failure
from .stats import summarize

# Work that keeps running on another stream after the solution returned shows up as a gap
# between the timed stream's end event and a device-wide synchronize.
ESCAPED_GAP_MS = 0.05
ESCAPED_GAP_SHARE = 0.25
# Our own clock bounds what a rank may claim: per call, the wall time its reports leave
# unaccounted (the harness's alignment and refills, the same work on both sides) may exceed the
# reference's by this share plus this much before the candidate's reported times are rejected.
UNACCOUNTED_SHARE = 1.5
UNACCOUNTED_SLACK_MS = 0.05

# How the times were taken, by device and by where the judge ran (docs/judge.md).
METHOD = {
    ("cuda", "ranks"): ("both sides' ranks alive at once, timed in alternating blocks (ABBA rounds) that the "
             "evaluating parent commands; CUDA events on every rank around each call, ranks aligned by "
             "a barrier and a synchronize before each call, call time = slowest rank, block time = "
             "median call; speedup = median of per-round ratios with a bootstrap 95% interval; fresh "
             "inputs for every call, rotated across copies spanning several L2s"),
    ("cuda", "outside"): (
        "both sides' ranks alive at once, alternating blocks (ABBA rounds) commanded by the judge; "
        "time per call = the judge's clock from before it thaws the side until the side is frozen again "
        "and its GPUs are quiet after the block, divided by its calls, the other side frozen meanwhile; "
        "inputs made by the judge in GPU memory it shares with the ranks, outputs of 64 drawn calls "
        "copied by it; speedup = median of per-round ratios with a bootstrap 95% interval"),
    ("cpu", "ranks"): (
        "the GPUs' default judge run on CPU, a check of that path and not a figure: both sides alive "
        "at once, alternating blocks (ABBA rounds) that the evaluating parent commands; time per call "
        "= the parent's clock around each block, divided by its calls; inputs made in the ranks from "
        "seeds mixed with a secret of the evaluation; the latest call of each input copy digested in "
        "the ranks; speedup = median of per-round ratios with a bootstrap 95% interval"),
    ("cpu", "outside"): ("both sides alive at once, alternating blocks (ABBA rounds) commanded by the judge; "
            "time per call = the judge's clock from before it thaws the side until the side is frozen "
            "again after the block, divided by its calls, the other side frozen meanwhile; inputs made "
            "by the judge, outputs of 64 drawn calls copied by it; harness work on both sides, so ratios "
            "lean towards 1; speedup = median of per-round ratios with a bootstrap 95% interval; a CPU "
            "smoke test, not a GPU figure"),
}


def side_timing(blocks: SideBlocks, clock: str) -> tuple[SideTiming, int]:
    """A side's timing pooled over its counted blocks, and how many calls left GPU work running."""
    iterations, per_rank, _ = side_iterations(blocks, clock)
    timing = SideTiming(per_rank_median_ms=per_rank, roofline_fraction=None, **summarize(iterations))  # type: ignore[typeddict-item]
    escaped = sum(1 for block in blocks.counted for times, gaps in zip(block.per_rank_ms, block.gaps_ms)
                  for t, g in zip(times, gaps) if g > max(ESCAPED_GAP_MS, ESCAPED_GAP_SHARE * t))
    return timing, escaped


def reported_time_failure(escaped: int, calls: int, unaccounted: dict[str, float]) -> Optional[Failure]:
    """On GPUs: the candidate's reported times fail when most calls left work running, or when our
    own clock saw much more than they account for."""
    if escaped > calls // 2:
        return make_failure(FailureClass.TIMING_VIOLATION,
                            f"in {escaped} of {calls} timed calls, GPU work kept running after the solution "
                            "returned (on a stream the caller does not wait for); make the current stream "
                            "wait for side streams before returning")
    if unaccounted["candidate"] > UNACCOUNTED_SHARE * unaccounted["reference"] + UNACCOUNTED_SLACK_MS:
        return make_failure(FailureClass.TIMING_VIOLATION,
                            f"the candidate's ranks reported call times that leave {unaccounted['candidate']:.3f} ms "
                            f"per call of our own wall clock unaccounted, against {unaccounted['reference']:.3f} ms "
                            "for the reference doing the same harness work: its timings were not measured by "
                            "the harness alone")
    return None


def score(paired: PairedTiming, *, device: str, world_size: int, target_half_width: float,
          roofline: Optional[Roofline], clocks: Optional[dict[str, Any]],
          pinning: Optional[dict[str, list[int]]], align: Optional[str] = None,
          judge: str = "ranks", shared_gpu: bool = False) -> tuple[Timing, Optional[Failure]]:
    """``judge``: where the judge ran, "outside" the ranks or in the "ranks" (Evaluation.judged).
    ``shared_gpu`` (EvalConfig.share_gpu): every rank on one GPU, where a rank's synchronize after
    a call also waits for its turn beside the others' contexts, so the gap after a call says
    nothing of work left running (an exact copy of the reference "left work" in 4,429 of 4,640
    calls on one H200, docs/judge.md); only the escape arm of the check is dropped."""
    cand, escaped = side_timing(paired.candidate, paired.clock)
    if shared_gpu:
        escaped = 0
    ref, _ = side_timing(paired.reference, paired.clock)
    unaccounted = {"candidate": unaccounted_ms(paired.candidate), "reference": unaccounted_ms(paired.reference)}
    failure = (reported_time_failure(escaped, cand["iterations"] * world_size, unaccounted)
               if device == "cuda" else None)
    if roofline is not None:
        cand["roofline_fraction"] = roofline["time_ms"] / cand["median_ms"]
        ref["roofline_fraction"] = roofline["time_ms"] / ref["median_ms"]
    low, high = paired.interval
    timing = Timing(
        device=device, method=METHOD[(device, judge)],  # type: ignore[typeddict-item]
        input_copies=paired.candidate.copies, warmup_iterations=paired.candidate.warmup_calls,
        reference=ref, candidate=cand, speedup=paired.speedup, roofline=roofline,
        interval={"low": low, "high": high, "level": 0.95,
                  "method": f"bootstrap percentile interval of the median of per-round ratios, {RESAMPLES} resamples"},
        rounds=[{"candidate_ms": r["candidate_ms"], "reference_ms": r["reference_ms"], "ratio": r["ratio"]}
                for r in paired.rounds],
        block_calls={"candidate": paired.candidate.counted[0].calls, "reference": paired.reference.counted[0].calls},
        stop={"reason": paired.stop_reason, "rounds": len(paired.rounds), "seconds": paired.seconds,  # type: ignore[typeddict-item]
              "half_width": paired.half_width(), "target_half_width": target_half_width},
        clocks=clocks, pinning=pinning, unaccounted_ms=unaccounted)
    if align is not None:
        timing["align"] = align  # type: ignore[typeddict-item]
        timing["method"] = align_method(timing["method"], align)
    return timing, failure


def align_method(method: str, align: str) -> str:
    """The method's words for how the ranks met before each call (TimingConfig.gpu_align)."""
    if align != "device":
        return method
    return (method + "; after the barrier the ranks also meet on the GPU (a one-element all-reduce "
            "queued before each call's start event), so every rank's window opens at once")
