"""scripts/device/kernels_doc.py: issue 23's targets read from reports, never assumed."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "device"))

import kernels_doc  # noqa: E402
from kernels_table import kernel_name  # noqa: E402


def evaluation(roofline: float, speedup: float = 1.2, verdict: str = "pass") -> dict:
    return {"verdict": verdict, "timing": {"speedup": speedup, "candidate": {"roofline_fraction": roofline}}}


def sweep(points: list[tuple[int, float]]) -> dict:
    return {"points": [{"message_bytes": size, "verdict": "pass", "timing": {"speedup": s}} for size, s in points]}


def rows(evals: dict, sweeps: dict) -> list[str]:
    return [line for line in kernels_doc.targets_section(evals, sweeps) if line.startswith("| ") and "ranks" not in line]


def test_the_best_hand_written_kernel_is_held_to_the_target_and_library_rows_are_not_entries() -> None:
    evals = {("all-reduce", "all_reduce_two_shot", 2): evaluation(0.81),
             ("all-reduce", "all_reduce_one_shot", 2): evaluation(0.90, verdict="fail"),  # a failure proves nothing
             ("all-reduce", "all_reduce_torch_symm_mem", 2): evaluation(0.95)}  # library: a baseline
    found = [row for row in rows(evals, {}) if row.startswith("| all-reduce at the default size")]
    assert found == ["| all-reduce at the default size: roofline fraction (target 80%) | 2 | all_reduce_two_shot | 81% | yes |"]


def test_small_sizes_count_their_worst_point_and_only_those_up_to_256_kib() -> None:
    sweeps = {("all-reduce", "all_reduce_two_shot", 4): sweep([(4096, 2.4), (262144, 1.9), (4 << 20, 3.0)])}
    found = [row for row in rows({}, sweeps) if "256 KiB" in row]
    assert found == ["| all-reduce at 256 KiB and below: the least speedup over the sizes swept (target 2x) "
                     "| 4 | all_reduce_two_shot | 1.900x | no |"]


def test_a_report_run_with_device_alignment_is_named_apart_and_never_seeded(tmp_path: Path) -> None:
    assert kernel_name(Path("sweep-all-reduce-all_reduce_two_shot-x2-align-device.json"), "all-reduce") == \
        "all_reduce_two_shot_align_device"
    report = {"verdict": "pass", "timing": {"align": "device"}, "solution": {"sha256": "s"}, "hardware_profile": "h"}
    assert kernels_doc.write_seeds({("all-reduce", "all_reduce_two_shot_align_device", 2): report}, {}, tmp_path) == []


def test_the_fixed_cost_of_the_smallest_size_is_taken_off_large_messages_only() -> None:
    def point(size: int, candidate_ms: float, reference_ms: float, roofline_ms: float) -> dict:
        return {"message_bytes": size, "verdict": "pass",
                "timing": {"candidate_ms": candidate_ms, "reference_ms": reference_ms, "roofline_ms": roofline_ms}}

    sweeps = {("all-reduce", "all_reduce_two_shot", 2): {"points": [
        point(4096, 0.1, 0.2, 0.00001), point(4 << 20, 0.15, 0.25, 0.01), point(64 << 20, 0.5, 0.6, 0.32)]}}
    found = [line for line in kernels_doc.fixed_cost_section(sweeps) if line.startswith("| all-reduce")]
    # 0.32 / 0.5 = 64% measured; 0.32 / (0.5 - 0.1) = 80% with the fixed cost off; NCCL 53%, 80%.
    assert found == ["| all-reduce: all_reduce_two_shot | 2 | 64 MiB | 0.100 | 0.500 | 64% | 80% | 0.200 | 0.600 | 53% | 80% |"]
    no_small_size = {("all-reduce", "x", 2): {"points": [point(64 << 20, 0.5, 0.6, 0.32), point(256 << 20, 1.5, 1.6, 1.2)]}}
    assert kernels_doc.fixed_cost_section(no_small_size) == []


def test_a_failed_report_keeps_its_plan_line_open_with_the_reason(monkeypatch) -> None:
    monkeypatch.setattr(kernels_doc, "planned", lambda: [(2, "eval", "all-reduce", "solutions/symm_mem/all_reduce_two_shot.py"),
                                                         (2, "eval", "all-gather", "solutions/symm_mem/all_gather_one_kernel.py"),
                                                         (4, "eval", "all-reduce", "solutions/symm_mem/all_reduce_two_shot.py")])
    failed = {"verdict": "fail", "started_at": "2026-11-28T05:27:00",
              "failure": {"failure_class": "resource_limit", "message": "the side filled its 8.0 GiB of disk"}}
    evals = {("all-reduce", "all_reduce_two_shot", 2): failed,
             ("all-gather", "all_gather_one_kernel", 2): {**evaluation(0.5), "started_at": "2026-11-28T05:28:00"}}
    lines = [line for line in kernels_doc.not_measured(evals, {}) if line.startswith("- ")]
    assert lines == ["- x2 eval all-reduce `solutions/symm_mem/all_reduce_two_shot.py` (the last run, 2026-11-28T05:27, "
                     "failed: resource_limit: the side filled its 8.0 GiB of disk)",
                     "- x4 eval all-reduce `solutions/symm_mem/all_reduce_two_shot.py`"]


DEADLINE = "the sweep's deadline (540 s) left 30 s, less than this size would need (~45 s)"


def sweep_report(*outcomes: str, verdict: str, complete: bool) -> dict:
    """A sweep over 4 KiB, 64 KiB, ... with each size ``pass``, ``fail`` or ``skipped``."""
    def point(i: int, outcome: str) -> dict:
        size = 4096 * 16 ** i
        if outcome == "skipped":
            return {"message_bytes": size, "verdict": None, "failure": None, "timing": None, "skipped": DEADLINE}
        timing = {"speedup": 1.5, "interval": {"low": 1.4, "high": 1.6}, "reference_ms": 0.3, "candidate_ms": 0.2,
                  "reference_busbw_gbps": 1.0,
                  "candidate_busbw_gbps": 1.5, "roofline_busbw_gbps": 2.0, "candidate_roofline_fraction": 0.75}
        if outcome == "fail":
            return {"message_bytes": size, "verdict": "fail", "timing": None, "skipped": None,
                    "failure": {"failure_class": "value_mismatch", "message": "rank 1: off by 2"}}
        return {"message_bytes": size, "verdict": "pass", "failure": None, "timing": timing, "skipped": None}

    return {"verdict": verdict, "complete": complete, "points": [point(i, o) for i, o in enumerate(outcomes)],
            "setting": {"dtype": "bfloat16"}, "hardware_profile": "h200-x2", "started_at": "2026-11-28T06:00:00",
            "command": "pkb sweep ..."}


def test_a_sweep_s_sizes_not_run_are_counted_apart_from_its_failures() -> None:
    failed_and_skipped = sweep_report("pass", "fail", "skipped", verdict="fail", complete=False)
    lines = kernels_doc.sweep_section("all-reduce", "all_reduce_two_shot", 2, failed_and_skipped)
    assert "verdict fail (1 of 3 sizes passed, 1 failed, 1 not run)" in lines[2]
    assert lines[7] == "| 64 KiB | | | | | | fail (value_mismatch) |"
    assert lines[8] == f"| 1 MiB | | | | | | not run: {DEADLINE} |"


def test_a_sweep_that_only_skipped_sizes_reads_incomplete_never_failed() -> None:
    # Schema 1.1 says incomplete; 1.0 said pass beside complete: false. Both read incomplete.
    for said in ("incomplete", "pass"):
        cut_short = sweep_report("pass", "skipped", "skipped", verdict=said, complete=False)
        head = kernels_doc.sweep_section("all-reduce", "all_reduce_two_shot", 2, cut_short)[2]
        assert "verdict incomplete (1 of 3 sizes passed, 2 not run)" in head and "failed" not in head


def test_an_incomplete_sweep_keeps_its_plan_line_open_as_not_run(monkeypatch) -> None:
    file = "solutions/symm_mem/all_reduce_two_shot.py"
    monkeypatch.setattr(kernels_doc, "planned", lambda: [(2, "sweep", "all-reduce", file), (4, "sweep", "all-reduce", file)])
    sweeps = {("all-reduce", "all_reduce_two_shot", 2): sweep_report("pass", "skipped", verdict="pass", complete=False),
              ("all-reduce", "all_reduce_two_shot", 4): sweep_report("fail", "skipped", verdict="fail", complete=False)}
    lines = [line for line in kernels_doc.not_measured({}, sweeps) if line.startswith("- ")]
    assert lines == [f"- x2 sweep all-reduce `{file}` (the last run, 2026-11-28T06:00, incomplete: "
                     f"1 of 2 sizes passed, 1 not run ({DEADLINE}))",
                     f"- x4 sweep all-reduce `{file}` (the last run, 2026-11-28T06:00, failed: "
                     f"0 of 2 sizes passed, 1 failed, 1 not run ({DEADLINE}))"]


def test_the_batch_table_heads_a_sweep_with_what_its_sizes_came_to() -> None:
    from kernels_table import sweep_rows

    report = {**sweep_report("pass", "skipped", verdict="incomplete", complete=False),
              "problem": {"slug": "all-reduce"}, "setting": {"world_size": 2, "dtype": "bfloat16"}, "wall_s": 500.0}
    rows = sweep_rows(Path("sweep-all-reduce-all_reduce_two_shot-x2.json"), report)
    assert rows[0] == "all_reduce_two_shot on all-reduce, x2, bfloat16, verdict incomplete (1 of 2 sizes passed, 1 not run), 500 s"
    assert rows[2] == f"     64K  skipped: {DEADLINE}"
