"""`pkb sweep`: the sizes a problem's axis gives, correctness judged at every size, the report's
schema, the table and the command line. CPU and gloo, a handful of small sizes."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import evaluator
import problems
from evaluator.cli import main
from evaluator.config import EvalConfig
from evaluator.hardware.collectives import bus_factor
from evaluator.sweep import (MAX_POINTS, SWEEP_REPORT_BYTES, format_bytes, parse_bytes, render_table, run_sweep,
                             sweep_points, sweep_problem, sweep_verdict)
from problems.spec import SWEEP_BYTES, parse_sweep_size, sweep_size

from .conftest import SOLUTIONS, TEST_LIMITS

HERE = Path(evaluator.__file__).parent
SWEEP_SCHEMA = json.loads((HERE / "sweep.schema.json").read_text())
REPORT_SCHEMA = json.loads((HERE / "report.schema.json").read_text())
PLAIN = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce", "gather", "scatter")


# -- sizes -------------------------------------------------------------------------------------
def test_the_default_range_is_4_kib_to_256_mib_in_powers_of_4():
    assert SWEEP_BYTES[0] == 4 * 2**10 and SWEEP_BYTES[-1] == 256 * 2**20
    assert all(b == a * 4 for a, b in zip(SWEEP_BYTES, SWEEP_BYTES[1:]))


@pytest.mark.parametrize("slug", PLAIN)
def test_every_plain_collective_declares_an_axis_over_the_default_range(slug):
    problem = problems.get(slug)
    assert problem.sweep is not None and problem.sweep.bytes == SWEEP_BYTES
    assert problem.sweep.collective in problem.collectives


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_all_reduce_points_hit_their_targets_exactly(world_size):
    points = sweep_points(problems.get("all-reduce"), world_size)
    assert [p.message_bytes for p in points] == list(SWEEP_BYTES)
    assert [p.param for p in points] == [b // 2 for b in SWEEP_BYTES]  # bf16 elements
    assert points[0].size == "sweep:4096"


def test_float32_halves_the_elements():
    points = sweep_points(problems.get("all-reduce"), 2, "float32", [parse_bytes("1M")])
    assert points[0].param == 2**18 and points[0].message_bytes == 2**20


@pytest.mark.parametrize("slug", ["all-gather", "reduce-scatter", "gather", "scatter", "tp-allgather-gemm",
                                  "tp-gemm-reducescatter", "tp-row-linear-allreduce"])
def test_sharded_axes_stay_divisible_by_the_world_size(slug):
    problem = problems.get(slug)
    for n in (2, 4, 8):
        if n not in problem.world_sizes:
            continue
        for point in sweep_points(problem, n):
            assert point.param % n == 0 and point.param >= n
            setting = problem.setting(n, point.size)  # shapes build at every point
            assert problem.traffic(setting).link_bytes > 0


def test_targets_that_round_to_one_shape_are_one_point():
    # all-to-all moves whole rows of 4096 elements per peer: 4 and 16 KiB both give one row each.
    points = sweep_points(problems.get("all-to-all"), 2, None, [4096, 16384, 65536])
    assert [p.param for p in points] == [8192, 32768]
    assert points[0].target_bytes == 4096 and points[0].message_bytes == 16384


def test_a_point_keeps_the_other_parameters_of_its_base_preset():
    problem = problems.get("tp-allgather-gemm")
    default = problem.setting(2, sweep_size(2**20))
    small = problem.setting(2, sweep_size(2**14, "small"))
    assert default["hidden"] == problem.sizes["default"]["hidden"] and default["tokens"] == 64
    assert small["hidden"] == problem.sizes["small"]["hidden"] and small["tokens"] == 2**14 // (48 * 2)


def test_sweep_size_names_round_trip():
    assert parse_sweep_size(sweep_size(4096)) == (4096, None)
    assert parse_sweep_size(sweep_size(4096, "small")) == (4096, "small")
    assert parse_sweep_size("default") is None
    with pytest.raises(ValueError, match="positive whole number of bytes"):
        parse_sweep_size("sweep:lots")


@pytest.mark.parametrize("text, value", [("4096", 4096), ("4K", 4096), ("64KiB", 65536), ("1M", 2**20),
                                         ("256MiB", 256 * 2**20), ("1g", 2**30)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "0", "-4K", "4 parsecs", "1.5M"])
def test_parse_bytes_refuses_what_it_cannot_read(text):
    with pytest.raises(ValueError, match="expected a positive number of bytes"):
        parse_bytes(text)


def test_format_bytes():
    assert [format_bytes(b) for b in (512, 4096, 6144, 2**20, 256 * 2**20, 2**31)] == \
        ["512 B", "4 KiB", "6 KiB", "1 MiB", "256 MiB", "2 GiB"]


def test_a_problem_without_an_axis_says_so_and_names_those_with_one():
    without = next(p for p in problems.all_problems() if p.sweep is None)
    with pytest.raises(ValueError, match=f"{without.slug} declares no sweep axis .*problems that can: all-reduce"):
        sweep_problem(without.slug)
    with pytest.raises(ValueError, match="declares no sweep axis"):
        without.setting(without.world_sizes[0], sweep_size(4096))


def test_an_unknown_base_preset_is_refused():
    with pytest.raises(ValueError, match="the sweep base 'huge' is not one of them"):
        sweep_points(problems.get("all-reduce"), 2, None, [4096], "huge")


@pytest.mark.parametrize("op, n, factor", [("all_reduce", 4, 1.5), ("all_gather", 4, 0.75), ("reduce_scatter", 8, 0.875),
                                           ("all_to_all", 2, 0.5), ("broadcast", 8, 1.0), ("reduce", 4, 1.0),
                                           ("gather", 4, 0.75), ("scatter", 2, 0.5), ("send_recv", 2, 1.0)])
def test_bus_factors_follow_nccl_tests(op, n, factor):
    assert bus_factor(op, n) == pytest.approx(factor)


def test_point_figures_follow_nccl_tests_and_survive_a_zero_time():
    from evaluator.sweep import point_timing

    timing = {"reference": {"median_ms": 0.5, "roofline_fraction": 0.4},
              "candidate": {"median_ms": 0.25, "roofline_fraction": 0.8}, "speedup": 2.0,
              "interval": {"low": 1.9, "high": 2.1, "level": 0.95, "method": "x"},
              "roofline": {"time_ms": 0.2, "bound": "link"}, "rounds": [{}] * 7, "stop": {"reason": "converged"}}
    t = point_timing({"timing": timing}, 2**20, 1.5)  # 1 MiB all-reduce at 4 ranks
    assert t["candidate_algbw_gbps"] == pytest.approx(2**20 / 0.25e-3 / 1e9)
    assert t["candidate_busbw_gbps"] == pytest.approx(1.5 * t["candidate_algbw_gbps"])
    assert t["roofline_busbw_gbps"] == pytest.approx(1.5 * 2**20 / 0.2e-3 / 1e9)
    assert (t["interval"], t["stop"], t["rounds"]) == ({"low": 1.9, "high": 2.1}, "converged", 7)
    zero = point_timing({"timing": {**timing, "reference": {"median_ms": 0.0}, "roofline": None}}, 2**20, 1.5)
    assert zero["reference_busbw_gbps"] is None and zero["roofline_busbw_gbps"] is None
    assert point_timing({"timing": None}, 2**20, 1.5) is None


# -- running -----------------------------------------------------------------------------------
def _config(solution: str, **overrides: Any) -> EvalConfig:
    return EvalConfig(problem=overrides.pop("problem", "all-reduce"), solution_path=SOLUTIONS / f"cpu_{solution}.py",
                      world_size=2, device="cpu", trials=2, seed=7, limits=TEST_LIMITS, **overrides)


@pytest.fixture(scope="module")
def wrong_at_16k_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`pkb sweep` (its main, in this process) of a candidate wrong at 16 KiB only, over 16 and 64
    KiB: the tests of the points, the report, the table and the command line read this one sweep
    (each size is a whole evaluation: a second sweep for the command line cost a minute; a passing
    4 KiB before the failure, 7 s, showed nothing the 64 KiB after it does not)."""
    folder = tmp_path_factory.mktemp("sweep")
    out = folder / "sweep.json"
    printed, said = io.StringIO(), io.StringIO()
    with redirect_stdout(printed), redirect_stderr(said):
        code = main(["sweep", "--problem", "all-reduce", "--solution", str(SOLUTIONS / "cpu_wrong_at_one_size.py"),
                     "--world-size", "2", "--sizes", "16K", "64K", "--trials", "2", "--seed", "7",
                     "--startup-timeout", str(TEST_LIMITS.startup_s), "--step-timeout", str(TEST_LIMITS.step_s),
                     "--out", str(out), "--reports", str(folder / "sizes")])
    return {"code": code, "sweep": json.loads(out.read_text()), "out": printed.getvalue(), "err": said.getvalue(),
            "reports": {int(f.stem.split("-")[1]): json.loads(f.read_text()) for f in (folder / "sizes").iterdir()}}


@pytest.fixture(scope="module")
def wrong_at_16k(wrong_at_16k_run: dict[str, Any]) -> dict[str, Any]:
    return wrong_at_16k_run["sweep"]


# The tests that read it share a worker under pytest -n (make test): the sweep runs once.
READS_WRONG_AT_16K = pytest.mark.xdist_group("sweep-wrong-at-16k")


@pytest.mark.slow
@READS_WRONG_AT_16K
def test_a_candidate_wrong_at_one_size_fails_at_that_size_only(wrong_at_16k):
    points = wrong_at_16k["points"]
    assert [p["verdict"] for p in points] == ["fail", "pass"]  # the sweep goes on past a failure
    assert points[0]["failure"]["failure_class"] == "value_mismatch"
    assert points[0]["params"] == {"numel": 8192} and points[0]["timing"] is None
    assert wrong_at_16k["verdict"] == "fail" and wrong_at_16k["failed_sizes"] == [16384]
    assert wrong_at_16k["solution"] == points[0]["report"]["solution"]  # from the first size, failed or not
    for good in (points[1],):
        t = good["timing"]
        assert t["speedup"] > 0 and t["interval"]["low"] <= t["speedup"] <= t["interval"]["high"]
        # busbw = bytes / time x nccl-tests' factor (1 for all-reduce at 2 ranks).
        assert t["reference_busbw_gbps"] == pytest.approx(good["message_bytes"] / (t["reference_ms"] / 1e3) / 1e9)
        assert t["candidate_roofline_fraction"] == pytest.approx(t["roofline_ms"] / t["candidate_ms"])
        assert good["report"]["setting"]["size"] == good["size"]


@pytest.mark.slow
@READS_WRONG_AT_16K
def test_a_sweep_report_validates_and_so_does_each_size(wrong_at_16k):
    jsonschema.validate(json.loads(json.dumps(wrong_at_16k)), SWEEP_SCHEMA)
    for point in wrong_at_16k["points"]:
        jsonschema.validate(point["report"], REPORT_SCHEMA)


def test_the_schema_refuses_a_point_without_its_size():
    point = {"target_bytes": 4096, "message_bytes": 4096, "params": {"numel": 2048}, "verdict": "pass",
             "failure": None, "timing": None, "skipped": None, "report": None}
    with pytest.raises(jsonschema.ValidationError, match="'size' is a required property"):
        jsonschema.validate(point, {**SWEEP_SCHEMA["$defs"]["point"], "$defs": SWEEP_SCHEMA["$defs"]})


@pytest.mark.slow
@READS_WRONG_AT_16K
def test_the_table_names_every_size_and_where_it_failed(wrong_at_16k):
    table = render_table(wrong_at_16k)
    lines = table.splitlines()
    rows = [line for line in lines if line.strip().startswith(("4 KiB", "16 KiB", "64 KiB"))]
    assert [r.split()[3] for r in rows] == ["FAIL", "PASS"]
    assert "verdict: FAIL (1 of 2 sizes passed)" in table
    assert "failed at 16 KiB: value_mismatch" in table and "CPU timings" in lines[0]


def test_a_size_independent_failure_skips_the_other_sizes():
    sweep = run_sweep(_config("syntax_error"), targets=[4096, 16384, 65536])
    assert [p["verdict"] for p in sweep["points"]] == ["fail", None, None]
    assert "syntax_error" in sweep["points"][1]["skipped"] and not sweep["complete"]
    jsonschema.validate(sweep, SWEEP_SCHEMA)
    assert "2 sizes not run" in render_table(sweep)


def test_sizes_that_cannot_start_before_the_deadline_are_skipped():
    sweep = run_sweep(_config("correct", deadline_s=1.0), targets=[4096, 16384])
    assert all(p["report"] is None and "deadline (1 s) left" in p["skipped"] for p in sweep["points"])
    assert sweep["verdict"] == "incomplete" and not sweep["complete"] and sweep["solution"] is None
    jsonschema.validate(sweep, SWEEP_SCHEMA)


# -- a sweep that did not run every size is no pass ---------------------------------------------
def _row(verdict: Any, skipped: Any = None) -> dict[str, Any]:
    return {"verdict": verdict, "skipped": skipped}


@pytest.mark.parametrize("verdicts, overall", [
    (["pass", "pass"], "pass"), (["pass", None], "incomplete"), ([None, None], "incomplete"),
    (["pass", "fail", None], "fail"), (["fail"], "fail"),
])
def test_the_verdict_is_pass_only_where_every_size_ran_and_passed(verdicts, overall):
    assert sweep_verdict([_row(v, None if v else "the deadline") for v in verdicts]) == overall


def test_pkb_sweep_that_ran_no_size_says_incomplete_and_exits_3(tmp_path, capsys):
    # What a user reads of a sweep cut short by its deadline: never a pass, in the table, the
    # report or the exit status (0 is a verdict over every size; 3 says there is none).
    out = tmp_path / "sweep.json"
    code = main(["sweep", "--problem", "all-reduce", "--solution", str(SOLUTIONS / "cpu_correct.py"),
                 "--world-size", "2", "--sizes", "4K", "16K", "--deadline", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    sweep = json.loads(out.read_text())
    assert code == 3 and sweep["verdict"] == "incomplete" and not sweep["complete"]
    assert "verdict: INCOMPLETE (0 of 2 sizes passed, 2 not run): not judged at every size, so no pass" in printed
    assert "PASS" not in printed
    jsonschema.validate(sweep, SWEEP_SCHEMA)


def test_the_schema_refuses_a_pass_that_did_not_run_or_pass_every_size():
    sweep = run_sweep(_config("correct", deadline_s=1.0), targets=[4096, 16384])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**sweep, "verdict": "pass"}, SWEEP_SCHEMA)  # what 1.0 wrote
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**sweep, "verdict": "pass", "complete": True}, SWEEP_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**sweep, "verdict": "fail"}, SWEEP_SCHEMA)  # no size failed


# -- the command line --------------------------------------------------------------------------
@pytest.mark.slow
@READS_WRONG_AT_16K
def test_pkb_sweep_reports_keeps_every_sizes_whole_report(wrong_at_16k_run):
    reports = wrong_at_16k_run["reports"]
    assert sorted(reports) == [16384, 65536]
    for point in wrong_at_16k_run["sweep"]["points"]:
        assert point["abridged"] == [] and reports[point["target_bytes"]] == point["report"]


@pytest.mark.slow
@READS_WRONG_AT_16K
def test_pkb_sweep_writes_the_report_and_prints_the_table(wrong_at_16k_run):
    # A sweep that ran to its end exits 0 whatever its verdict: the report says the verdict.
    assert wrong_at_16k_run["code"] == 0
    sweep = wrong_at_16k_run["sweep"]
    jsonschema.validate(sweep, SWEEP_SCHEMA)
    assert sweep["verdict"] == "fail" and [p["target_bytes"] for p in sweep["points"]] == [16384, 65536]
    assert "verdict: FAIL (1 of 2 sizes passed)" in wrong_at_16k_run["out"]
    assert "pkb sweep: 2 sizes of all-reduce, one evaluation each" in wrong_at_16k_run["err"]
    assert "size 1 of 2 (sweep:16384): fail" in wrong_at_16k_run["err"]
    assert "size 2 of 2 (sweep:65536): pass" in wrong_at_16k_run["err"]


@pytest.mark.parametrize("argv, words", [
    (["--problem", "tp-summa-2d-linear", "--world-size", "4"], "tp-summa-2d-linear declares no sweep axis"),
    (["--problem", "all-reduce", "--world-size", "3"], "supports world sizes [2, 4, 8], not 3"),
    (["--problem", "all-reduce", "--world-size", "2", "--sizes", "4 parsecs"], "message size '4 parsecs'"),
    (["--problem", "all-reduce", "--world-size", "2", "--base", "huge"], "the sweep base 'huge'"),
])
def test_bad_sweep_arguments_exit_2_with_a_clear_message(argv, words, capsys):
    assert main(["sweep", "--solution", str(SOLUTIONS / "cpu_correct.py"), *argv]) == 2
    assert words in capsys.readouterr().err


# -- the device script -------------------------------------------------------------------------
SWEEP_BATCH = Path(__file__).resolve().parents[2] / "scripts" / "device" / "sweep_batch.sh"


def test_the_device_sweep_script_parses():
    import subprocess

    result = subprocess.run(["bash", "-n", str(SWEEP_BATCH)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_device_sweep_script_names_kernels_that_exist():
    import re

    text = SWEEP_BATCH.read_text()
    entries = re.findall(r"([a-z-]+):(solutions/[\w/]+\.py)", text)
    assert len(entries) == 3
    for slug, path in entries:
        assert (SWEEP_BATCH.parents[2] / path).is_file() and problems.get(slug).sweep is not None


def test_the_table_brackets_no_interval_from_too_few_rounds():
    from evaluator.sweep import point_timing

    def point(message_bytes: int, rounds: int, low: float, high: float) -> dict[str, Any]:
        timing = {"reference": {"median_ms": 0.5}, "candidate": {"median_ms": 0.25}, "speedup": 1.381,
                  "interval": {"low": low, "high": high, "level": 0.95, "method": "x"}, "roofline": None,
                  "rounds": [{}] * rounds, "stop": {"reason": "time_cap"}}
        return {"message_bytes": message_bytes, "params": {"n": message_bytes // 2}, "verdict": "pass",
                "skipped": "", "failure": None, "timing": point_timing({"timing": timing}, message_bytes, 2.0)}

    sweep = {"problem": {"slug": "all-reduce"}, "hardware_profile": None, "verdict": "pass", "wall_s": 3.0,
             "setting": {"world_size": 2, "device": "cpu", "backend": "gloo", "dtype": "bfloat16"},
             "axis": {"param": "n", "collective": "all_reduce", "bus_factor": 1.0},
             "points": [point(4096, 1, 1.381, 1.381), point(16384, 6, 1.2, 1.5)]}
    table = render_table(sweep)
    assert "1.381x no interval (1)" in table and "[1.381, 1.381]" not in table
    assert "1.381x [1.200, 1.500]" in table
    assert "no interval (n): timed over n alternating rounds, fewer than the 6 a 95% interval needs" in table


# -- the report's size --------------------------------------------------------------------------
# What the portal reads of a worker's request (Django's DATA_UPLOAD_MAX_MEMORY_SIZE): a sweep
# report the worker cannot post is a sweep lost.
PORTAL_BODY_BYTES = 2_621_440
CPU_SWEEP = json.loads((Path(__file__).resolve().parents[1] / "portal" / "data" / "sweep_all_reduce_cpu.json").read_text())


def _at_eight_ranks(failing: bool, checked_calls: int = 60) -> dict[str, Any]:
    """A real size's report (CPU, 2 ranks) as eight ranks write it: 5 seeded trials and
    ``checked_calls`` checked timed calls of 8 ranks each (60: the judge outside, as `pkb sweep`
    at 8 ranks measured them, 317 KB a size; 3 or 4 on GPUs judged in the ranks), 200 timed
    rounds (the cap), and, failing, every failure text at report.FAILURE_TEXT_BYTES of escaped
    astral characters."""
    import copy

    from evaluator.report import FailureClass, bounded_failure, make_failure

    report = copy.deepcopy(CPU_SWEEP["points"][0]["report"])
    trial, check = report["trials"][0], report["trials"][0]["ranks"][0]
    report["trials"] = [{**trial, "index": i, "kind": "correctness" if i < 5 else "timed",
                         "ranks": [{**check, "rank": r} for r in range(8)]} for i in range(5 + checked_calls)]
    report["timing"]["rounds"] = report["timing"]["rounds"][:1] * 200
    report["setting"]["world_size"] = 8
    if failing:
        text = "\U0001F600" * 300_000
        report["verdict"] = "fail"
        report["failure"] = bounded_failure(make_failure(
            FailureClass.VALUE_MISMATCH, text, rank=3, trial=7, output=0, traceback=text, compiler_output=text,
            stacks={str(r): text for r in range(8)}, stderr={str(r): text for r in range(8)}))
    return report


def _sweep_of(report: dict[str, Any], sizes: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """run_sweep at 8 ranks over ``sizes`` sizes, every one of which reports ``report``."""
    import evaluator.sweep

    monkeypatch.setattr(evaluator.sweep, "evaluate", lambda config, hook=None: {
        **report, "setting": {**report["setting"], "size": config.size}})
    config = EvalConfig(problem="all-reduce", solution_path=SOLUTIONS / "cpu_correct.py", world_size=8,
                        device="cpu", trials=5, seed=7, limits=TEST_LIMITS)
    return run_sweep(config, targets=[4096 * (i + 1) for i in range(sizes)], command="pkb sweep " + "x" * 100_000)


@pytest.mark.parametrize("sizes", [9, MAX_POINTS])
def test_a_sweep_failing_at_every_size_at_eight_ranks_stays_within_what_the_portal_reads(sizes, monkeypatch):
    worst = _at_eight_ranks(failing=True)
    sweep = _sweep_of(worst, sizes, monkeypatch)
    assert len(json.dumps(sweep)) <= SWEEP_REPORT_BYTES
    assert len(json.dumps({"sweep": sweep, "worker": "w" * 200}).encode()) < PORTAL_BODY_BYTES  # the worker's post
    assert sweep["verdict"] == "fail" and len(sweep["failed_sizes"]) == sizes
    jsonschema.validate(sweep, SWEEP_SCHEMA)
    for point in sweep["points"]:
        # Abridged only as far as it must: the failure's class and where it happened stay.
        assert point["abridged"][:2] == ["timed_passing_ranks", "passing_ranks"]
        failure = point["report"]["failure"]
        assert (failure["failure_class"], failure["rank"], failure["trial"]) == ("value_mismatch", 3, 7)
        jsonschema.validate(point["report"], REPORT_SCHEMA)
    assert "sizes' reports abridged" in render_table(sweep)


def test_an_honest_sweep_at_eight_ranks_judged_outside_drops_only_the_timed_calls_passing_checks(monkeypatch):
    # Nine such sizes embedded whole were past what the portal reads (2.88 MB measured, docs/sweeps.md).
    passing = _at_eight_ranks(failing=False)
    assert 9 * len(json.dumps(passing)) > PORTAL_BODY_BYTES
    sweep = _sweep_of(passing, 9, monkeypatch)
    assert sweep["verdict"] == "pass" and len(json.dumps(sweep)) <= SWEEP_REPORT_BYTES
    for point in sweep["points"]:
        assert point["abridged"] == ["timed_passing_ranks"]
        seeded = [t for t in point["report"]["trials"] if t["kind"] == "correctness"]
        assert seeded == passing["trials"][:5] and len(point["report"]["trials"]) == 65


def test_an_honest_sweep_at_eight_ranks_judged_in_the_ranks_keeps_every_size_whole(monkeypatch):
    passing = _at_eight_ranks(failing=False, checked_calls=4)
    sweep = _sweep_of(passing, 9, monkeypatch)
    assert sweep["verdict"] == "pass" and all(p["abridged"] == [] for p in sweep["points"])
    assert all(p["report"]["trials"] == passing["trials"] for p in sweep["points"])


def test_more_sizes_than_a_report_holds_are_refused():
    with pytest.raises(ValueError, match=f"at most {MAX_POINTS} message sizes"):
        sweep_points(problems.get("all-reduce"), 2, None, [4096 * (i + 1) for i in range(MAX_POINTS + 1)])
