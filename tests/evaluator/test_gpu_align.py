"""`--gpu-align device`: on GPUs judged in the ranks, the ranks also meet on the GPU before each
timed call (TimingConfig.gpu_align, docs/timing.md). No GPU here: what is checked is that the
option reaches the ranks' timing, that a rank queues the meeting before its start event (with the
CUDA calls played by stand-ins), and that the report says which alignment ran."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
import torch

from evaluator import rank_runner, rank_timing, scoring
from evaluator.cli import main
from evaluator.config import EvalConfig, TimingConfig

from .conftest import SOLUTIONS

REPO = Path(__file__).resolve().parents[2]


def test_the_option_reaches_the_timing_config_of_gpu_runs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[EvalConfig] = []

    def evaluate(config: EvalConfig, progress: Any = None) -> None:
        seen.append(config)
        raise SystemExit(0)

    monkeypatch.setattr("evaluator.api.evaluate", evaluate)
    with pytest.raises(SystemExit):
        main(["eval", "--problem", "all-reduce", "--solution", str(SOLUTIONS / "cpu_correct.py"),
              "--world-size", "2", "--gpu-align", "device"])
    assert seen[0].gpu_align == "device"
    gpu = EvalConfig(problem="all-reduce", solution_path=SOLUTIONS / "cpu_correct.py", world_size=2,
                     device="cuda", gpu_align="device")
    assert gpu.resolved_timing().gpu_align == "device"
    assert TimingConfig().gpu_align == "host"  # the default method is unchanged
    cpu = EvalConfig(problem="all-reduce", solution_path=SOLUTIONS / "cpu_correct.py", world_size=2,
                     device="cpu", gpu_align="device")
    assert cpu.resolved_timing().gpu_align == "host"  # CPU runs are judged outside: nothing to align


class _Recorder:
    """Plays the CUDA calls of TaskRunner.timed_call and notes their order."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    def event(self, enable_timing: bool = True) -> Any:
        recorder = self

        class Event:
            def record(self) -> None:
                recorder.steps.append("event")

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, other: Any) -> float:
                return 0.5

        return Event()


def _runner(recorder: _Recorder) -> Any:
    runner = object.__new__(rank_runner.TaskRunner)
    runner.ctx = SimpleNamespace(device=torch.device("cuda", 0))
    runner.side = "candidate"
    runner._meeting_point = torch.zeros(1)
    runner.align = lambda: recorder.steps.append("host barrier")
    runner.call = lambda inputs: recorder.steps.append("call") or torch.ones(2)
    return runner


@pytest.mark.parametrize("device_align, order", [
    (False, ["host barrier", "event", "call", "event", "event"]),
    (True, ["host barrier", "meet on the GPU", "event", "call", "event", "event"]),
])
def test_a_rank_meets_its_peers_on_the_gpu_before_the_start_event(monkeypatch: pytest.MonkeyPatch,
                                                                  device_align: bool, order: list[str]) -> None:
    recorder = _Recorder()
    met: list[torch.Tensor] = []
    monkeypatch.setattr(rank_runner, "_CudaEvent", recorder.event)
    monkeypatch.setattr(rank_runner, "_cuda_synchronize", lambda device: None)
    monkeypatch.setattr(rank_runner, "_all_reduce",
                        lambda tensor, *a, **k: met.append(tensor) or recorder.steps.append("meet on the GPU"))
    runner = _runner(recorder)
    elapsed, gap, outputs = runner.timed_call({}, device_align=device_align)
    assert recorder.steps == order
    assert met == ([runner._meeting_point] if device_align else [])
    assert (elapsed, gap) == (0.5, 0.5) and len(outputs) == 1


def test_the_timing_session_asks_for_the_meeting_on_cuda_only(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    monkeypatch.setattr(rank_timing, "copy_count", lambda nbytes, cfg, device: 2)  # no L2 to ask here

    def session(device: str, align: str) -> rank_timing.TimingSession:
        runner = SimpleNamespace(
            ctx=SimpleNamespace(device=torch.device(device)),
            inputs=lambda seed: {"x": torch.zeros(1)}, tensor_bytes=lambda inputs: 4,
            timed_call=lambda inputs, device_align: asked.append(device_align) or (0.1, 0.0, [torch.zeros(1)]))
        return rank_timing.TimingSession(runner, {**TimingConfig.quick().__dict__, "gpu_align": align}, 7,
                                         keep_outputs=False)

    session("cpu", "device").block(1)
    session("cpu", "host").block(1)
    assert asked == [False, False]
    assert session("cuda", "device").device_align and not session("cuda", "host").device_align


def test_the_report_says_which_alignment_ran() -> None:
    schema = json.loads((REPO / "evaluator" / "report.schema.json").read_text())
    timing_schema = {"$ref": "#/$defs/timing", "$defs": schema["$defs"]}
    seed = json.loads((REPO / "docs" / "results" / "h200-x2-nvlink" /
                       "symm_mem-all-reduce-all_reduce_two_shot.json").read_text())
    timing = seed["reports"][0]["timing"]  # a GPU report judged in the ranks, before the option
    jsonschema.validate(timing, timing_schema)
    jsonschema.validate({**timing, "align": "device"}, timing_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**timing, "align": "sideways"}, timing_schema)
    assert scoring.align_method("m", "host") == "m"
    assert "also meet on the GPU" in scoring.align_method("m", "device")
