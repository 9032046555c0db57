"""Whose failure a reference starved of GPU memory is (evaluator/hardware/gpu_memory.py), from
stand-in ``nvidia-smi`` outputs (no GPU here)."""

from __future__ import annotations

from types import SimpleNamespace

from evaluator.hardware.gpu_memory import held_by, starved_by

GPUS = "GPU-aaa, 0, 143771\nGPU-bbb, 1, 143771\n"


def test_memory_is_summed_per_gpu_over_the_named_processes_only():
    apps = "101, GPU-aaa, 70000\n102, GPU-aaa, 5000\n103, GPU-bbb, 9000\n999, GPU-bbb, 120000\n"
    assert held_by([101, 102, 103], smi=apps, gpus=GPUS) == {0: (75000, 143771), 1: (9000, 143771)}


def test_a_candidate_holding_more_than_half_of_a_gpu_is_blamed_for_the_reference():
    apps = "101, GPU-aaa, 2000\n102, GPU-bbb, 100000\n200, GPU-aaa, 130000\n"
    why = starved_by([101, 102], smi=apps, gpus=GPUS)
    assert why is not None and "100000 MiB of GPU 1's 143771 MiB" in why
    # Another process's memory (the reference's, another evaluation's) is never the candidate's.
    assert starved_by([101], smi=apps, gpus=GPUS) is None


def test_unreadable_or_unavailable_answers_blame_nobody():
    assert starved_by([101], smi="101, GPU-aaa, [N/A]\n", gpus=GPUS) is None
    assert starved_by([101], smi="", gpus=GPUS) is None
    assert held_by([101], smi="garbage\n", gpus="also garbage\n") == {}


def test_the_evaluation_asks_only_on_gpus_and_survives_a_failing_query(monkeypatch):
    from pathlib import Path

    from evaluator.api import Evaluation
    from evaluator.config import EvalConfig

    evaluation = Evaluation(EvalConfig(problem="all-reduce", world_size=2, solution_path=Path(
        "solutions/broken/cpu_correct.py"), sandbox=False))
    candidate = SimpleNamespace(box=SimpleNamespace(process_ids=lambda: [101]))
    monkeypatch.setattr("evaluator.hardware.gpu_memory.starved_by", lambda pids: "held too much")
    assert evaluation.starved_reference(candidate) is None  # on the CPU nothing is asked
    object.__setattr__(evaluation.config, "device", "cuda")
    failure = evaluation.starved_reference(candidate)
    assert failure["failure_class"] == "resource_limit" and failure["message"] == "held too much"

    def broken(pids):
        raise RuntimeError("nvidia-smi printed something new")

    monkeypatch.setattr("evaluator.hardware.gpu_memory.starved_by", broken)
    assert evaluation.starved_reference(candidate) is None
