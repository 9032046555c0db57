"""The in-rank judge, which GPU evaluations run by default, run on CPU (``cpu_judge="ranks"``).

Every other CPU evaluation is judged outside the ranks, so without these the path that scores
the board (rank_runner's own inputs and seeds, digests taken in the ranks, the parent's kept
slots and re-checks) would first run on a GPU host, where its failures are recorded as the
models' (scripts/device/board_keep.py). The seed secret of the sixth red-team pass went in that
way, tested only on the input maker: these run it end to end."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from .conftest import HOSTILE, SOLUTIONS, run_hostile

# Unconfined, the in-rank path differs in its re-hash of the outputs the ranks wrote: make
# test-long runs that pass (make test's 10 minutes are spent).
pytestmark = pytest.mark.unconfined_in_long


def in_ranks(solution: Path, **overrides: Any) -> dict[str, Any]:
    return run_hostile(solution.stem, solution_path=solution, cpu_judge="ranks", **overrides)


def test_the_references_own_code_passes_timed_and_the_report_says_which_judge_ran():
    # Both sides must draw the same inputs from the same secret, or an exact copy fails its
    # trials (the candidate's) against the reference's re-checks.
    report = in_ranks(SOLUTIONS / "cpu_correct.py", trials=3)
    assert report["verdict"] == "pass", report["failure"]
    timing = report["timing"]
    assert timing["method"].startswith("the GPUs' default judge run on CPU")
    assert "checks" not in timing  # the judge outside's draw: not this judge's
    assert math.isfinite(timing["speedup"]) and 0.2 < timing["speedup"] < 5
    assert {t["kind"] for t in report["trials"]} == {"correctness", "timed"}
    # Where the wall time went, as judged outside (docs/judge.md: the default's phases on a GPU).
    assert list(report["wall_time"]["phases_s"]) == ["start", "timing", "candidate_end", "finish",
                                                     "reference_end", "comparison"]


def test_a_rank_wrong_alone_fails_in_its_trials():
    report = in_ranks(SOLUTIONS / "cpu_wrong_on_one_rank.py", timing=False)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]


def test_the_jobs_public_seeds_no_longer_predict_a_problems_shared_inputs():
    # Judged in the ranks the candidate's job holds every seed; before the seed secret the attack
    # answered every call of this problem from a table built at import (docs/judge.md, sixth pass).
    report = in_ranks(HOSTILE / "predicts_shared_inputs.py", problem="fsdp-tp-swiglu-mlp")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]
    assert report["failure"]["trial"] == 0


# -- the ninth red-team pass (2026-11-29): one side at a time under this judge too -------------------

def test_helpers_that_starve_the_references_blocks_cannot_fail_the_reference():
    # Both sides used to be alive for the whole timed phase: 40 spinners per rank, each in a
    # session of its own and stopped only while the rank's own calls ran, held the reference's
    # block past its deadline, and a wrong candidate ended as our harness_error ("ranks 0, 1 made
    # no progress for 8 s during timing"). The candidate now stands frozen around each of the
    # reference's blocks, its helpers with it.
    report = in_ranks(HOSTILE / "starves_the_reference_beside_the_ranks_judge.py")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]


@pytest.mark.confined  # the sandbox's set-up time is what it ran out
def test_a_candidate_that_takes_the_processors_at_its_start_cannot_fail_the_references(monkeypatch):
    # Both sides started at once under this judge after the fourth pass closed it for the judge
    # outside: the spinners of starves_the_reference_start held the reference's sandbox past its
    # set-up time (cut from 90 s to 10 s here, as in test_judge_outside.py), our harness_error
    # ("the sandbox could not be set up"). The reference now starts beside the frozen candidate.
    from evaluator.sandbox.confined import ConfinedBox
    monkeypatch.setattr(ConfinedBox._expect, "__defaults__", (10.0,))
    report = in_ranks(HOSTILE / "starves_the_reference_start.py")
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]


@pytest.mark.confined  # it reads its side's start from its init, PID 1 of the side's namespace
@pytest.mark.slow
@pytest.mark.long  # 80 s: the finish is held to the deadline's last seconds
def test_a_finish_held_to_the_deadline_is_the_candidates_not_the_references():
    # blames_the_reference under this judge: the candidate held its finish to just before its
    # allowance and left 200 helpers per rank to be torn down; the reference's recomputation ran
    # out of the evaluation's time, our harness_error ("the side ran past its time limit of 55 s").
    from evaluator.config import Limits
    report = in_ranks(HOSTILE / "blames_the_reference.py", deadline_s=60, limits=Limits())
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "resource_limit", report["failure"]
    assert "left the reference too little" in report["failure"]["message"]


@pytest.mark.timeout(120)  # before the fix one of them waited for ever
@pytest.mark.parametrize("attack", ["says_done_and_leaves", "waits_out_the_finish",
                                    "answers_the_last_block_at_the_finish"])
def test_a_rank_keeps_its_deadline_whatever_it_says(attack):
    # The judge outside had closed each (fourth and fifth passes); in the ranks a "done" said in
    # the first call, then an exit with status 0, passed for finished and the parent waited for
    # ever (no verdict in 120 s), and a "waiting" or a second answer to the last block at the
    # finish cleared the rank's deadline: held to the side's whole allowance (61.6 s under a 3 s
    # step). None of them is kept now: the exit is a crash, the sleep a deadlock at the step.
    import time

    from evaluator.config import Limits
    started = time.monotonic()
    report = in_ranks(HOSTILE / f"{attack}.py", limits=Limits(startup_s=120.0, step_s=3.0, total_s=60.0))
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] in ("crash", "deadlock"), report["failure"]
    assert time.monotonic() - started < 40


@pytest.mark.parametrize("attack", ["floods_step_labels_in_the_ranks", "floods_call_claims"])
def test_what_a_rank_sends_is_not_kept_without_bound(attack, monkeypatch):
    # Judged in the ranks, every step's label was kept whole (3,000 of half a MiB per rank: the
    # parent's peak memory 3.3 GiB against 0.3) and every "called" claim, which nothing here
    # reads, for the whole evaluation (15 s of claims at import: 472 MiB against 293). The
    # verdicts are the attacks' own (wrong answers; an honest all-reduce); what is kept is the point.
    from evaluator import launcher
    kept: dict[str, tuple[int, int]] = {}
    end = launcher.SideRun.end

    def measured_end(self):
        kept[self.side] = (sum(len(label) for state in self.ranks for label in state.labels), len(self.called))
        return end(self)

    monkeypatch.setattr(launcher.SideRun, "end", measured_end)
    report = in_ranks(HOSTILE / f"{attack}.py")
    assert report["verdict"] == ("fail" if attack.startswith("floods_step") else "pass"), report["failure"]
    labels, claims = kept["candidate"]
    assert labels < 2 * launcher.MAX_LABELS * (launcher.MAX_LABEL_CHARS + 42), labels
    assert claims == 0, claims


@pytest.mark.parametrize("timing", [True, False])
def test_links_planted_where_the_reference_writes_its_exact_answers_are_caught(timing):
    # The sixth pass's plants_reference_links, closed then for the judge outside: judged in the
    # ranks, unconfined, the candidate wrong by 0.05 everywhere passed, timed and untimed (the
    # reference wrote its exact answers through links to /dev/null, and the parent judged by the
    # problem's tolerance). The reference's folders are now checked on this path too.
    report = in_ranks(HOSTILE / "plants_reference_links.py", dtype="bfloat16", timing=timing)
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    expected = "protocol_violation" if report["sandbox"] == "off" else "value_mismatch"
    assert report["failure"]["failure_class"] == expected, report["failure"]


def test_a_compressed_output_file_is_never_inflated_by_the_parent(monkeypatch):
    # Judged in the ranks the parent loads the files the ranks wrote: rank 0 replaced its first
    # trial's tensor record with 3 GiB of zeros, deflated to 13 MB, and PyTorch's reader inflated
    # all of it into the parent's memory (peak 3.4 GiB against 0.3) before it refused the record.
    # Such a file is now unreadable without being read: the rank's protocol_violation.
    import zipfile

    from evaluator import outputs
    handed: list[str] = []
    load = outputs.torch.load

    def watched_load(source, *args, **kwargs):
        with zipfile.ZipFile(source) as archive:
            handed.extend(r.filename for r in archive.infolist() if r.compress_type != zipfile.ZIP_STORED)
        if hasattr(source, "seek"):
            source.seek(0)
        return load(source, *args, **kwargs)

    monkeypatch.setattr(outputs.torch, "load", watched_load)
    report = in_ranks(HOSTILE / "inflates_its_output_files.py")
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
    assert "no readable outputs for trial0" in report["failure"]["message"]
    assert handed == []  # no compressed record reached PyTorch's reader
