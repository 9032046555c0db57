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
