"""scripts/bench/trial_cost.py: every stage of a reference trial timed in real ranks (gloo)."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))

import trial_cost  # noqa: E402


def test_each_stage_of_a_trial_is_timed_on_every_rank_and_the_files_are_counted(tmp_path):
    args = argparse.Namespace(problem="all-reduce", world_size=2, device="cpu", size="small",
                              trials=2, warmup=1, out_dir=str(tmp_path))
    ranks = trial_cost.measure(args)
    assert len(ranks) == 2
    for rank in ranks:
        assert set(rank["medians"]) == set(trial_cost.STAGES)
        assert rank["medians"]["call"] > 0 and rank["medians"]["save"] > 0
        assert rank["bytes"] > 0  # the trial's outputs and residuals were written, then removed
    assert list(tmp_path.iterdir()) == []
    rows = trial_cost.table(ranks)
    assert [row.split(" | ")[0].lstrip("| ") for row in rows[2:2 + len(trial_cost.STAGES)]] == list(trial_cost.STAGES)
