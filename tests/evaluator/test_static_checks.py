"""What the parent refuses before any rank starts: here, a file that would turn NVLink multicast
back on (the hosts' GPUs are shared; multicast can take them out of service)."""

from __future__ import annotations

import pytest

from contract.gpu import NO_MULTICAST_ENV
from evaluator.api import evaluate
from evaluator.config import EvalConfig
from evaluator.static_checks import static_failure

HONEST = b"import torch\n\ndef solution(x, *, group):\n    return x\n"


@pytest.mark.parametrize("setting", sorted(NO_MULTICAST_ENV))
def test_a_file_that_names_a_multicast_setting_is_refused(setting):
    source = HONEST + f'\nimport os\nos.environ["{setting}"] = "1"\n'.encode()
    failure = static_failure(source)
    assert failure is not None and failure["failure_class"] == "protocol_violation"
    assert setting in failure["message"] and "multicast off" in failure["message"]


def test_symmetric_memory_and_multimem_text_alone_are_not_refused():
    # 45 of ParallelKernelBench's model files carry multimem code with a fallback for a 0
    # multicast pointer: they run, and fail on their own if they need it (docs/runs.md).
    source = HONEST + b'\nKERNEL = "multimem.ld_reduce.global.add.bf16x2"\nimport torch.distributed._symmetric_memory\n'
    assert static_failure(source) is None


def test_the_evaluation_stops_before_any_rank_starts(tmp_path):
    solution = tmp_path / "sets_nvls.py"
    solution.write_bytes(HONEST + b'\nimport os\nos.environ.setdefault("NCCL_NVLS_ENABLE", "1")\n')
    report = evaluate(EvalConfig(problem="all-reduce", solution_path=solution, world_size=2, device="cpu",
                                 size="small", timing=False))
    assert report["verdict"] == "fail" and report["failure"]["failure_class"] == "protocol_violation"
    assert report["trials"] == [] and report["wall_time"]["total_s"] < 5
