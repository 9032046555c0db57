"""A side's disk holds every output file the judge asks it for.

The fused all-gather + matmuls at its default size writes 576 MiB per call and rank; on 2 x H200
(2026-11-28) both its kernels and PyTorch's own fused op failed `resource_limit` ("the side filled
its 8.0 GiB of disk") before their trials ended, so the problem could not be judged at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator import api
from evaluator.api import Evaluation, disk_for_outputs
from evaluator.config import EvalConfig, ResourceLimits
from evaluator.job import CHECKED_CALLS, CHECKED_COPIES

GiB = 2**30
SOLUTION = Path(__file__).resolve().parents[2] / "solutions" / "library" / "tp_fused_allgather_matmul_torch.py"


@pytest.fixture
def host_of(monkeypatch):
    """Pretend the host has this much memory (os.sysconf as api reads it)."""
    def pretend(total_bytes: int) -> None:
        pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": total_bytes // 4096}
        monkeypatch.setattr(api.os, "sysconf", lambda name: pages[name])
    return pretend


def test_small_outputs_keep_the_configured_disk(host_of):
    host_of(512 * GiB)
    assert disk_for_outputs(8 * GiB, files_per_rank=9, bytes_per_file=64 * 2**20, world_size=2) == 8 * GiB


def test_large_outputs_get_room_for_every_file(host_of):
    host_of(512 * GiB)
    disk = disk_for_outputs(8 * GiB, files_per_rank=9, bytes_per_file=752 * 2**20, world_size=2)
    assert disk >= 9 * 2 * 752 * 2**20
    assert disk < 16 * GiB


def test_the_disk_never_grows_past_the_hosts_share(host_of):
    host_of(24 * GiB)  # this repository's CI machine
    assert disk_for_outputs(8 * GiB, files_per_rank=69, bytes_per_file=GiB, world_size=8) == 8 * GiB
    host_of(512 * GiB)
    assert disk_for_outputs(8 * GiB, files_per_rank=69, bytes_per_file=GiB, world_size=8) \
        == int(api.HOST_MEMORY_SHARE * 512 * GiB / api.DISK_HOST_PARTS)


@pytest.mark.parametrize("gpu_judge, reference_files", [("ranks", 5 + CHECKED_COPIES), ("outside", 5 + CHECKED_CALLS)])
def test_the_fused_allgather_matmul_fits_its_outputs_on_a_gpu_host(host_of, monkeypatch, gpu_judge, reference_files):
    host_of(512 * GiB)
    monkeypatch.setattr(api.torch.cuda, "device_count", lambda: 2)  # nothing here touches a GPU
    evaluation = Evaluation(EvalConfig(problem="tp-fused-allgather-matmul", solution_path=SOLUTION,
                                       world_size=2, device="cuda", dtype="bfloat16", size="default",
                                       gpu_judge=gpu_judge))
    per_call = 2 * 8192 * 4096 * 2 + 2 * (2 * 8192 * 7168 * 2)  # gathered A and two products, per rank
    assert evaluation.output_bytes_bound() >= per_call
    candidate = evaluation.resources("candidate")
    assert candidate.disk_bytes >= (5 + CHECKED_COPIES) * 2 * per_call > ResourceLimits().disk_bytes
    assert evaluation.output_files_per_rank("reference") == reference_files
    # The reference's disk also holds its exact answers: room_for_exact multiplies what it gets.
    assert evaluation.resources("reference").disk_bytes >= 3 * min(
        reference_files * 2 * per_call, int(api.HOST_MEMORY_SHARE * 512 * GiB / api.DISK_HOST_PARTS))
