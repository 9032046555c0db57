"""The pieces of paired timing that need no ranks: the interval, which timed calls were kept,
what the parent's own clock says, GPU clock snapshots and NUMA-local cores."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from evaluator.hardware import affinity, clocks
from evaluator.paired import Block, DrivenFailure, PairedTimer, SideBlocks, wait_started
from evaluator.stats import median_interval


def test_the_interval_holds_the_median_and_is_the_same_every_time():
    rng = random.Random(7)
    ratios = [1.0 + rng.gauss(0, 0.01) for _ in range(30)]
    low, high = median_interval(ratios)
    assert low <= statistics.median(ratios) <= high
    assert (low, high) == median_interval(ratios)


def test_the_interval_narrows_as_rounds_are_added():
    rng = random.Random(3)
    ratios = [1.0 + rng.gauss(0, 0.02) for _ in range(200)]
    few, many = median_interval(ratios[:10]), median_interval(ratios)
    assert many[1] - many[0] < (few[1] - few[0]) / 2


def test_an_interval_of_one_round_is_that_round():
    assert median_interval([1.3]) == (1.3, 1.3)


def test_a_side_that_reports_less_than_our_clock_saw_leaves_time_unaccounted():
    honest = Block(calls=2, per_rank_ms=[[1.0, 1.0], [0.9, 1.1]], gaps_ms=[[0, 0], [0, 0]], wall_ms=2.4)
    assert honest.iterations_ms == [1.0, 1.1]
    assert honest.unaccounted_ms == pytest.approx(0.15)
    forged = Block(calls=2, per_rank_ms=[[0.001, 0.001], [0.001, 0.001]], gaps_ms=[[0, 0], [0, 0]], wall_ms=2.4)
    assert forged.unaccounted_ms == pytest.approx(1.199)


def timer_with(calls: int, copies: int) -> PairedTimer:
    timer = PairedTimer.__new__(PairedTimer)
    timer.cand = SideBlocks(run=None, name="candidate", calls=calls, copies=copies)  # type: ignore[arg-type]
    return timer


def test_the_kept_calls_are_each_slots_latest():
    timer = timer_with(calls=23, copies=4)  # calls 0..22; slot s holds calls s, s+4, ...
    assert timer.kept_calls([0, 1, 2, 3]) == [19, 20, 21, 22]
    assert timer.kept_calls([3, 1]) == [19, 21]
    assert timer_with(calls=2, copies=4).kept_calls([0, 1, 2, 3]) == [0, 1]  # slots never used: skipped


def test_the_checked_slots_are_distinct_and_in_the_rotation():
    timer = timer_with(calls=100, copies=9)
    draws = {tuple(timer.secret_slots(4)) for _ in range(50)}
    assert all(len(set(d)) == 4 and all(0 <= s < 9 for s in d) for d in draws)
    assert len(draws) > 1  # drawn, not fixed
    assert timer_with(calls=100, copies=2).secret_slots(4) == [0, 1]


SMI = ("0, 1980, 3201, 38, 120.5, 0x0000000000000000\n"
       "1, 1980, 3201, 40, 118.0, 0x0000000000000000\n")


def test_a_snapshot_reads_nvidia_smi_rows(monkeypatch):
    monkeypatch.setattr(clocks, "run_smi", lambda *args, **kw: SMI)
    rows = clocks.snapshot([0, 1])
    assert rows is not None and [r["gpu"] for r in rows] == [0, 1]
    assert rows[0]["sm_mhz"] == 1980 and rows[1]["temperature_c"] == 40
    assert rows[0]["slowdown"] is False and rows[0]["idle"] is False


def test_a_snapshot_is_none_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(clocks, "run_smi", lambda *args, **kw: None)
    assert clocks.snapshot([0]) is None
    assert clocks.compare(None, None)["moved"] is False


def row(sm: float, reasons: str = "0x0000000000000000") -> dict:
    value = int(reasons, 16)
    return {"gpu": 0, "sm_mhz": sm, "reasons": reasons, "slowdown": bool(value & clocks.SLOWDOWN_BITS),
            "idle": bool(value & clocks.IDLE_BIT)}


def test_steady_clocks_do_not_flag_the_run():
    assert clocks.compare([row(1980)], [row(1975)])["moved"] is False


def test_a_thermal_slowdown_or_a_clock_change_flags_the_run():
    slowed = clocks.compare([row(1980)], [row(1980, "0x0000000000000020")])
    assert slowed["moved"] and "slowed down" in slowed["note"]
    dropped = clocks.compare([row(1980)], [row(1755)])
    assert dropped["moved"] and "1980 -> 1755" in dropped["note"]


def test_an_idle_reading_is_noted_not_compared():
    result = clocks.compare([row(345, "0x0000000000000001")], [row(1980)])
    assert result["moved"] is False and "not compared" in result["note"]


def test_cpu_lists_parse_as_the_kernel_writes_them():
    assert affinity.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert affinity.parse_cpulist("5") == [5]


def test_each_rank_gets_the_cores_of_its_gpus_node(monkeypatch, tmp_path: Path):
    for bus, cpus in (("0000:18:00.0", "0-3"), ("0000:9a:00.0", "4-7")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "local_cpulist").write_text(cpus + "\n")
    monkeypatch.setattr(affinity, "run_smi", lambda *a, **k: "0, 00000000:18:00.0\n1, 00000000:9A:00.0\n")
    monkeypatch.setattr(affinity.os, "sched_getaffinity", lambda pid: set(range(6)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # Only the cores this process may use: rank 1's node has 4-7, of which 4 and 5 are ours.
    assert affinity.rank_cpus(2, sysfs=tmp_path) == {"0": [0, 1, 2, 3], "1": [4, 5]}


def test_no_pinning_where_the_topology_is_unknown(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(affinity, "run_smi", lambda *a, **k: None)
    assert affinity.rank_cpus(2, sysfs=tmp_path) is None


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert clocks.visible_gpus(2) == [2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert clocks.visible_gpus(2) == [0, 1]




def test_reported_times_our_clock_denies_are_a_timing_violation():
    from evaluator.scoring import reported_time_failure

    assert reported_time_failure(0, 100, {"candidate": 0.16, "reference": 0.15}) is None
    forged = reported_time_failure(0, 100, {"candidate": 0.40, "reference": 0.15})
    assert forged is not None and forged["failure_class"] == "timing_violation"
    assert "0.400 ms per call" in forged["message"] and "0.150 ms" in forged["message"]
    escaped = reported_time_failure(60, 100, {"candidate": 0.15, "reference": 0.15})
    assert escaped is not None and "kept running" in escaped["message"]


class StartingSide:
    """A side that is still starting: it never waits for a command, and fails on its n-th poll."""

    def __init__(self, fails_on_poll: int = 0) -> None:
        self.polls = 0
        self.fails_on_poll = fails_on_poll

    def waiting(self) -> bool:
        return False

    def poll(self, timeout: float):
        self.polls += 1
        if self.fails_on_poll and self.polls >= self.fails_on_poll:
            return {"failure_class": "crash", "message": "rank 1 was killed by SIGKILL"}
        return None


@pytest.mark.parametrize("fails_on_poll", [1, 2, 3])
def test_a_failure_at_start_up_is_blamed_on_the_side_it_happened_in(fails_on_poll):
    # Waiting for either side, whichever poll sees the candidate's crash: the candidate's failure,
    # never the reference's (which would be counted as ours: harness_error).
    for waited in ("candidate", "reference"):
        runs = {"candidate": StartingSide(fails_on_poll), "reference": StartingSide()}
        with pytest.raises(DrivenFailure) as caught:
            wait_started(waited, runs)  # type: ignore[arg-type]
        assert caught.value.side == "candidate"
    alone = {"candidate": StartingSide(fails_on_poll)}
    with pytest.raises(DrivenFailure) as caught:
        wait_started("candidate", alone)  # type: ignore[arg-type]
    assert caught.value.side == "candidate"


class _AnsweredSide:
    """A side whose ranks answered the block the timer sends with ``answer`` (what
    ``PairedTimer.block`` reads of a SideRun)."""

    def __init__(self, answer: dict) -> None:
        self.answer = answer
        self.ranks = [None, None]
        self.blocks: dict = {}
        self.duplicate_blocks: list = []

    def command(self, payload: dict, within_s: float) -> None:
        for rank in range(len(self.ranks)):
            self.blocks[(payload["block"], rank)] = {"first_call": 0, **self.answer}

    def waiting(self) -> bool:
        return True

    def poll(self, timeout: float) -> None:
        return None


@pytest.mark.parametrize("what", ["a time of 400 digits", "a time that is text", "a time that is NaN",
                                  "a negative time", "copies that are text"])
def test_a_blocks_times_the_parent_cannot_read_are_the_sides_protocol_violation(what):
    # GPUs judged in the ranks: a rank's answer carries its calls' times, and the token that
    # makes it the harness's is in the candidate's memory (hostile/forges_huge_call_times.py).
    # float() and int() of what it forged raised (no verdict), or let NaN reach the report.
    from .hostile.forges_huge_call_times import FORGED

    honest = {"times_ms": [1.0, 1.0], "gap_ms": [0.0, 0.0], "copies": 2, "digests": [[0, ["a"]], [1, ["b"]]]}
    change = FORGED[what]
    answer = {**honest, **{key: value * 2 if key == "times_ms" else value for key, value in change.items()}}
    timer = PairedTimer.__new__(PairedTimer)
    timer.cand = SideBlocks(run=_AnsweredSide(answer), name="candidate")  # type: ignore[arg-type]
    timer.ref = SideBlocks(run=_AnsweredSide(honest), name="reference")  # type: ignore[arg-type]
    timer.step_s, timer.block_id = 1.0, 0
    with pytest.raises(DrivenFailure) as caught:
        timer.block(timer.cand, 2)
    assert caught.value.side == "candidate"
    assert caught.value.failure["failure_class"] == "protocol_violation"
    assert timer.block(timer.ref, 2).per_rank_ms == [[1.0, 1.0], [1.0, 1.0]]  # the harness's own answer reads
