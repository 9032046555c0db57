"""The reference's re-checks through the judge's slots (judge outside): each trial and checked
timed call recomputed on the judge's inputs, its outputs and exact records read back from the
reference's slot and judged there, with no file written, copied out of the sandbox or loaded
(docs/judge.md, "Where a pkb eval's wall time goes")."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evaluator.candidate import CandidateError
from evaluator.exact import flatten_records, split_exact_parts
from evaluator.judge.buffers import OutputError, RankBuffers
from evaluator.shim.buffers import SharedBuffers

from .conftest import TEST_LIMITS

BROKEN = Path(__file__).resolve().parents[2] / "solutions" / "broken"


def test_records_travel_as_tensors_and_a_description_and_come_back_whole():
    native = [torch.arange(6.0).reshape(2, 3), torch.ones(4, dtype=torch.bfloat16)]
    records = [{"residual": torch.full((2, 3), 0.5), "why": None, "low": None, "high": torch.zeros(2, 3)},
               {"residual": None, "why": "in float64 this output is a list"}]
    tensors, meta = flatten_records(records)
    outputs, back = split_exact_parts(native + tensors + [meta])
    assert [o.shape for o in outputs] == [(2, 3), (4,)]
    assert torch.equal(back[0]["residual"], records[0]["residual"]) and back[0]["low"] is None
    assert torch.equal(back[0]["high"], records[0]["high"])
    assert back[1] == {"residual": None, "why": "in float64 this output is a list"}


@pytest.mark.parametrize("description", [b"not json", b'{"a": 1}', b'[{"residual": 5}]', b'[{"residual": 0}, {"residual": 0}]',
                                         b'[{"why": 3}]', b'[{"mine": 1}]', b"[[[[" * 1000])
def test_a_description_that_is_not_the_harnesss_is_refused(description):
    parts = [torch.ones(2), torch.ones(2), torch.frombuffer(bytearray(description), dtype=torch.uint8)]
    with pytest.raises(ValueError):
        split_exact_parts(parts)


def test_tensors_no_record_names_are_refused():
    tensors, meta = flatten_records([{"residual": None, "why": None}])
    with pytest.raises(ValueError, match="no record names"):
        split_exact_parts([torch.ones(2), torch.ones(2), meta])


def test_a_span_of_slots_is_read_whole_and_no_further(tmp_path):
    """A re-check's outputs and residuals take more than the half slot a candidate's may; read
    over its span they come back, and a description past the span is refused."""
    judge_side = RankBuffers("probe", calls=4, call_input_bytes=64, slot_bytes=4096)
    rank_side = SharedBuffers(*judge_side.rank_args())
    rank_side.map(torch.device("cpu"))
    big = [torch.arange(1000, dtype=torch.float32), torch.ones(1000)]  # 8,000 bytes: more than half of two slots
    with pytest.raises(CandidateError):
        rank_side.write_outputs(big, judge_side.slot(0), judge_side.slot_bytes)  # one slot cannot hold it
    rank_side.write_outputs(big, judge_side.slot(0), 3 * judge_side.slot_bytes, in_place=False)
    read = judge_side.read_outputs(0, span=3)
    assert all(torch.equal(a, b) for a, b in zip(read, big))
    with pytest.raises(OutputError):
        judge_side.read_outputs(0)  # a candidate's bound: half of one slot
    judge_side.close()


def _copy_of_the_reference(tmp_path: Path) -> Path:
    path = tmp_path / "copy.py"
    path.write_text('from problems import get as _get\n\nsolution = _get("all-reduce").reference\n')
    return path


def test_judged_outside_the_reference_writes_no_files_and_a_wrong_timed_call_is_still_caught(tmp_path):
    from evaluator.api import evaluate
    from evaluator.config import EvalConfig

    honest = evaluate(EvalConfig(problem="all-reduce", solution_path=_copy_of_the_reference(tmp_path),
                                 world_size=2, device="cpu", size="small", limits=TEST_LIMITS,
                                 workdir=tmp_path / "work"))
    assert honest["verdict"] == "pass", honest["failure"]
    assert len(honest["trials"]) > 5 and all(t["passed"] for t in honest["trials"])
    assert not list((tmp_path / "work" / "reference").glob("*.pt"))  # nothing went through a file
    stale = evaluate(EvalConfig(problem="all-reduce", solution_path=BROKEN / "cpu_stale_cache.py",
                                world_size=2, device="cpu", size="small", limits=TEST_LIMITS))
    assert stale["failure"]["failure_class"] == "value_mismatch"
    assert "timed call" in stale["failure"]["message"]


def test_a_ring_too_short_for_a_recheck_falls_back_to_the_references_files(tmp_path, monkeypatch):
    from evaluator.api import evaluate
    from evaluator.config import EvalConfig
    from evaluator.judge import driver

    monkeypatch.setattr(driver.Judge, "recheck_span", lambda self: 0)
    report = evaluate(EvalConfig(problem="all-reduce", solution_path=_copy_of_the_reference(tmp_path),
                                 world_size=2, device="cpu", size="small", limits=TEST_LIMITS,
                                 workdir=tmp_path / "work"))
    assert report["verdict"] == "pass", report["failure"]
    assert list((tmp_path / "work" / "reference").glob("*.pt"))


def test_released_by_block_many_rechecks_share_one_block_and_each_is_judged(tmp_path, monkeypatch):
    """Released by block the reference's ring holds a whole timing block, so one command carries
    many re-checks, each in its own span of slots: every one is judged (a stale candidate fails at
    a timed call, an honest one passes with every re-check counted)."""
    from evaluator.api import evaluate
    from evaluator.config import EvalConfig
    from evaluator.judge import driver

    blocks: list[int] = []
    run_calls = driver.Judge.run_calls

    def counting(self, run, other, side, written, *args, **kwargs):
        if kwargs.get("exact_span"):
            blocks.append(len(written[0]))
        return run_calls(self, run, other, side, written, *args, **kwargs)

    monkeypatch.setattr(driver.Judge, "run_calls", counting)
    honest = evaluate(EvalConfig(problem="all-reduce", solution_path=_copy_of_the_reference(tmp_path),
                                 world_size=2, device="cpu", size="small", limits=TEST_LIMITS,
                                 judge_release="block"))
    assert honest["verdict"] == "pass", honest["failure"]
    assert max(blocks) > 1 and sum(blocks) == len(honest["trials"])
    stale = evaluate(EvalConfig(problem="all-reduce", solution_path=BROKEN / "cpu_stale_cache.py",
                                world_size=2, device="cpu", size="small", limits=TEST_LIMITS,
                                judge_release="block"))
    assert stale["failure"]["failure_class"] == "value_mismatch", stale["failure"]
