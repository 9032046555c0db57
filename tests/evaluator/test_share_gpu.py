"""`--share-gpu`: every rank on GPU 0 over gloo, the GPU path's mechanisms on a one-GPU host.

Its runs are on the device (scripts/gpu/shared_gpu_smoke.sh); here, what decides where each rank
and each of the judge's buffers goes, and the errors that say when it cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.api import Evaluation
from evaluator import cli
from evaluator.config import EvalConfig

SOLUTION = Path("solutions/broken/cpu_correct.py")


def config(**kw) -> EvalConfig:
    return EvalConfig(problem="all-reduce", solution_path=SOLUTION, world_size=4, **kw)


def test_shared_ranks_all_sit_on_gpu_zero_and_talk_over_gloo():
    shared = config(device="cuda", share_gpu=True)
    assert [shared.rank_device(r) for r in range(4)] == ["cuda:0"] * 4
    assert shared.backend == "gloo" and shared.gpus_needed == 1


def test_without_it_each_rank_has_its_own_gpu_and_nccl():
    own = config(device="cuda")
    assert [own.rank_device(r) for r in range(4)] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert own.backend == "nccl" and own.gpus_needed == 4
    cpu = config()
    assert cpu.rank_device(3) == "cpu" and cpu.backend == "gloo" and cpu.gpus_needed == 0


def test_sharing_a_gpu_on_the_cpu_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="needs --device cuda"):
        Evaluation(config(share_gpu=True))


def test_a_host_short_of_gpus_is_told_how_many_it_needs(monkeypatch):
    monkeypatch.setattr("torch.cuda.device_count", lambda: 0)
    with pytest.raises(ValueError, match="needs 4 GPUs; this host has 0 .*--share-gpu"):
        Evaluation(config(device="cuda"))
    with pytest.raises(ValueError, match="needs 1 GPUs; this host has 0"):
        Evaluation(config(device="cuda", share_gpu=True))


def test_the_command_line_flag_reaches_the_evaluation(monkeypatch, capsys):
    seen = []

    def evaluate(config, *rest):
        seen.append(config)
        raise ValueError("stopped here")

    monkeypatch.setattr("evaluator.api.evaluate", evaluate)
    argv = ["eval", "--problem", "all-reduce", "--solution", str(SOLUTION), "--world-size", "2", "--device", "cpu"]
    assert cli.main(argv + ["--share-gpu"]) == 2 and cli.main(argv) == 2
    assert [c.share_gpu for c in seen] == [True, False]
    assert "stopped here" in capsys.readouterr().err


def _paired(candidate_gap_ms: float):
    from evaluator.paired import Block, PairedTiming, SideBlocks

    def side(name: str, gap: float) -> SideBlocks:
        block = Block(calls=4, per_rank_ms=[[1.0] * 4, [1.0] * 4], gaps_ms=[[gap] * 4, [gap] * 4], wall_ms=4.2)
        return SideBlocks(run=None, name=name, calls=4, copies=2, counted=[block])  # type: ignore[arg-type]

    return PairedTiming(clock="ranks", rounds=[{"candidate_ms": 1.0, "reference_ms": 1.0, "ratio": 1.0}],
                        speedup=1.0, interval=(1.0, 1.0), stop_reason="time_cap", seconds=1.0,
                        candidate=side("candidate", candidate_gap_ms), reference=side("reference", 0.0))


def test_the_gap_after_a_call_fails_work_left_running_on_own_gpus_only():
    """On GPUs of its own, GPU work left after most calls fails the candidate; sharing one GPU,
    a rank's synchronize waits for its turn beside its peers, so the gap proves nothing there."""
    from evaluator.scoring import score

    kw = dict(device="cuda", world_size=2, target_half_width=0.01, roofline=None, clocks=None, pinning=None)
    _, failure = score(_paired(candidate_gap_ms=0.6), **kw)
    assert failure is not None and failure["failure_class"] == "timing_violation"
    assert "kept running" in failure["message"]
    _, failure = score(_paired(candidate_gap_ms=0.6), shared_gpu=True, **kw)
    assert failure is None
