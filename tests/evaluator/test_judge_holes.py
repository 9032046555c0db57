"""Holes in the judge itself, closed whether or not the host can confine (these run with the
sandbox on and, in `make test`, off): each attack is written as a submitter would write it.

Unconfined, a candidate reaches more of the host: the files around its work folder, what its
process was started with, its peers' job. The attacks that go there run unconfined in `make test`.
Those that work only inside the candidate's own process (its memory, its frames, its module
attributes) against what the parent alone decides (seeds, deadlines, its clock, the channel's
protocol) meet the same judge either way: they run unconfined in `make test-long`
(``unconfined_in_long``), confined in both."""

from __future__ import annotations

import pytest

from evaluator.api import evaluate
from evaluator.config import EvalConfig

from .conftest import HOSTILE, TEST_LIMITS, run_hostile

run = run_hostile
WITHIN_ITS_OWN_PROCESS = pytest.mark.unconfined_in_long


@WITHIN_ITS_OWN_PROCESS
def test_a_cache_keyed_on_input_values_never_answers_a_checked_timed_call():
    report = run("value_keyed_cache")
    assert report["verdict"] == "pass", report["failure"]
    timed = [t for t in report["trials"] if t["kind"] == "timed"]
    assert len(timed) >= 2 and len({t["seed"] for t in timed}) == len(timed)
    assert {t["seed"] for t in timed}.isdisjoint(t["seed"] for t in report["trials"] if t["kind"] == "correctness")


def test_modules_a_candidate_plants_are_never_imported_by_the_reference(tmp_path):
    report = run("plants_harness_modules", workdir=tmp_path / "work")
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch"
    assert not list(tmp_path.rglob("reference*/**/evaluator/__init__.py"))


def test_the_channel_token_is_nowhere_in_the_environment():
    report = run("reads_channel_token", timing=False)
    assert report["verdict"] == "pass", report["failure"]


@WITHIN_ITS_OWN_PROCESS
def test_a_deadline_ends_a_slow_candidate_with_a_diagnosis_inside_it():
    import time

    started = time.monotonic()
    # Ten calls of 2 s each outlast the candidate's half of a 20 s deadline, on any host. (30 s
    # made the test wait 15 s for the same verdict; the 10 s left still start the side under load.)
    report = run("slow_but_steady", trials=10, timing=False, deadline_s=20)
    seconds = time.monotonic() - started
    failure = report["failure"]
    assert failure["failure_class"] == "deadlock", failure
    assert failure["message"].startswith("the side ran past its time limit of 10 s; ranks 0, 1 in trial")
    # Where each rank stood when its stack was taken depends on the host's load: in the
    # candidate's sleep or already in the harness waiting for its peer; a stack it is, either way.
    assert set(failure["stacks"]) == {"0", "1"}
    assert all("rank_main.py" in stack for stack in failure["stacks"].values())
    assert seconds < 20


@WITHIN_ITS_OWN_PROCESS
def test_the_harness_frames_cannot_shorten_or_stop_the_timed_phase():
    from evaluator.config import TimingConfig

    quick = TimingConfig.quick()
    report = run("steers_timing_through_frames")
    assert report["verdict"] == "pass", report["failure"]
    timing = report["timing"]
    # The parent alone sizes blocks and decides when to stop: what the candidate bent is not read.
    assert timing["block_calls"]["candidate"] >= quick.min_block_calls
    assert timing["stop"]["rounds"] >= quick.min_rounds
    assert timing["candidate"]["iterations"] >= quick.min_rounds * quick.min_block_calls


@WITHIN_ITS_OWN_PROCESS
def test_a_forged_answer_to_a_timed_block_is_a_protocol_violation():
    report = run("forges_timed_block")
    assert report["verdict"] == "fail"
    failure = report["failure"]
    # Whichever gives it away first: the harness's own answer arriving after the forged one; a
    # block answered before its last call (each call after the first waits for the judge's go);
    # or, the judge having frozen the side on the forged answer, an output slot still empty or
    # holding a wrong answer.
    message = failure["message"]
    assert (failure["failure_class"] == "protocol_violation" and "twice" in message) or \
        (failure["failure_class"] == "protocol_violation" and "after 1 of its" in message) or \
        (failure["failure_class"] == "protocol_violation" and "no outputs were written" in message) or \
        (failure["failure_class"] == "value_mismatch" and "timed call" in message), failure
    assert report["timing"] is None


def test_the_seeds_in_the_job_do_not_rebuild_a_peers_inputs():
    report = run("rebuilds_peer_inputs")
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch"
    assert report["failure"]["trial"] == 0


@WITHIN_ITS_OWN_PROCESS
def test_a_rebound_harness_clock_does_not_change_a_cpu_speedup():
    # The candidate makes the rank's clock run 20x slow: its calls report a twentieth of their
    # time. On CPU the ratios come from the parent's wall clock, which candidate code cannot reach.
    report = run("slows_the_harness_clock")
    assert report["verdict"] == "pass", report["failure"]
    timing = report["timing"]
    assert "judge's clock" in timing["method"]
    assert timing["speedup"] < 4.0, timing  # a rank's clock is read for nothing; loaded cores wobble


def test_digests_agree_between_a_device_and_the_parent_and_see_one_changed_bit():
    import torch

    from evaluator.digest import outputs_digest

    x = torch.randn(1001, dtype=torch.float32).to(torch.bfloat16)  # 2002 bytes: not a whole number of words
    assert outputs_digest([x]) == outputs_digest([x.clone()])
    flipped = x.clone()
    flipped.view(torch.int16)[777] ^= 1
    assert outputs_digest([flipped]) != outputs_digest([x])
    # Same bytes, other shape or dtype: another digest.
    assert outputs_digest([x.reshape(7, 143)]) != outputs_digest([x])
    assert outputs_digest([x.view(torch.float16)]) != outputs_digest([x])


# -- the third red-team pass (2026-11-29) -------------------------------------------------------

def test_the_judges_copies_on_its_disk_are_compared_as_the_judge_wrote_them(monkeypatch):
    # Unconfined, the lazy candidate (no communication at all) summed its ranks' files on the
    # judge's disk at its finish, after the judge had written them: PASS at 1.8x before. Confined,
    # that disk is in none of its namespaces and its wrong answers stand. Since 2026-11-29 the judge
    # keeps its copies in memory while its holding budget lasts and writes only the rest: with no
    # budget, every copy goes to its disk, as every copy did when this attack was found.
    import evaluator.api

    monkeypatch.setattr(evaluator.api, "hold_budget", lambda device, world_size: 0)
    report = run("rewrites_judge_files")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    if report["sandbox"] == "off":
        assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
        assert "changed on the judge's disk" in report["failure"]["message"]
    else:
        assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]


@WITHIN_ITS_OWN_PROCESS
def test_a_candidate_cannot_have_its_own_failure_reported_as_ours():
    # Its CandidateError of class harness_error used to be reported as such: "our fault, never
    # the candidate's" (docs/report-schema.md).
    report = run("claims_harness_error", timing=False)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "runtime_error", report["failure"]


# -- the fourth red-team pass (2026-11-28) ------------------------------------------------------

@WITHIN_ITS_OWN_PROCESS
@pytest.mark.parametrize("attack, says", [
    # "called" lines with the token, sent from import for 15 s, each naming a block of 4000
    # digits: the judge kept them all until a block began (284 MiB of its memory in those 15 s,
    # the start-up allowance is 840 s). The harness claims calls only inside a block.
    ("floods_call_claims", "a 'called' message for no call"),
    # Rank 0 answered its first trial's block 600 times while rank 1 slept in it, each answer
    # naming a new task of half a MiB: the judge listed every task as a step (307 MiB).
    ("floods_block_answers", "twice"),
])
def test_messages_a_judged_rank_floods_end_the_side_and_are_not_kept(attack, says):
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = run(attack, timing=False)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
    assert says in report["failure"]["message"]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


@WITHIN_ITS_OWN_PROCESS
def test_a_rank_that_says_done_and_exits_mid_command_ends_in_a_verdict():
    # "done" in the harness's name from inside the first trial, then an exit with status 0: both
    # ranks passed for finished, the judge stopped checking deadlines and waited for ever.
    report = run("says_done_and_leaves", timing=False)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
    assert "a 'done' message before the judge's finish" in report["failure"]["message"]


@WITHIN_ITS_OWN_PROCESS
def test_a_forged_ready_message_cannot_break_the_report():
    # "ready" again from inside a trial, its software a string and its compile time NaN: building
    # the report raised (dict() of a string) and the wrong candidate got a traceback, no verdict.
    import math

    report = run("forges_ready_software", timing=False)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]
    assert all(isinstance(v, str) for v in report["software"].values())
    compile_s = report["wall_time"]["compile_s"]
    assert compile_s is None or math.isfinite(compile_s)


@WITHIN_ITS_OWN_PROCESS
def test_a_forged_error_cannot_make_the_report_break_its_schema():
    # An error in the harness's name whose traceback was a mapping and compiler output a number:
    # both went into the failure, the report broke its schema, and the portal refused it.
    import json
    from pathlib import Path

    import jsonschema

    import evaluator

    report = run("reports_odd_error_fields", timing=False)
    assert report["verdict"] == "fail"
    schema = json.loads((Path(evaluator.__file__).parent / "report.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(report, allow_nan=False)), schema)


def test_a_process_that_continues_itself_while_frozen_is_caught():
    # A helper's timer sent it SIGCONT every 10 ms; woken while its rank stood stopped it spun
    # 2 ms and stopped itself again: a few ms beside each reference block, under the 20 ms that
    # /proc's ticks could show, and the candidate passed. Threads' run times are now read in ns.
    # Its wake-ups can miss every window the judge watches (unconfined, the freeze's sweep and
    # its timer fight), and a run it misses is an honest copy whose CPU ratio is noise (1.22x
    # once in a loaded make test): so the check must catch it within three runs, and every run it
    # does not catch must be a pass that gained nothing beyond this host's noise.
    missed = []
    for _ in range(3):
        report = run("wakes_itself_while_frozen")
        if report["verdict"] == "pass":
            missed.append(report["timing"]["speedup"])
            continue
        assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
        # Seen beside a reference block, in the candidate's own windows after its answers while
        # the judge read its outputs, or between those and the next thaw (read_still): either way
        # it ran while stopped.
        message = report["failure"]["message"]
        assert "while they stood stopped" in message or "after they were stopped" in message, message
        break
    else:
        pytest.fail(f"three runs, none caught: speedups {missed}")
    assert all(speedup < 1.5 for speedup in missed), missed


# -- the fifth red-team pass (2026-11-28) -------------------------------------------------------

def test_a_process_whose_main_thread_has_exited_is_read_while_frozen():
    # A helper whose main thread had ended alone (its /proc/PID/stat then says Z) was passed over
    # as exited, its living threads with it: continued by its SIGCONT timers it ran beside the
    # reference unread, and passed (4 runs of 5). Threads are now read by their own state.
    report = run("hides_behind_an_exited_main_thread")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
    message = report["failure"]["message"]
    assert "while they stood stopped" in message or "after they were stopped" in message, message


@pytest.mark.confined  # counted by the side's own PID namespace, which only the sandbox gives it
def test_a_process_started_while_the_side_stood_stopped_fails_the_candidate():
    # A helper continued by its SIGCONT timer while the reference started spawned burners (well
    # under a ms of its own run time) that spun 0.6 s of processor between the judge's two
    # readings and were reaped by the kernel: in none of the readings, 6 runs of 6. The init now reads its
    # namespace's last process id when the side stands frozen and again before it is thawed.
    report = run("forks_burners_while_frozen")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
    # Its burners, seen at the thaw; or on a loaded host its own spawns, past the 1 ms of run time.
    message = report["failure"]["message"]
    assert "was started while the side stood stopped" in message or "while they stood stopped" in message, message


@WITHIN_ITS_OWN_PROCESS
@pytest.mark.parametrize("attack, says", [
    # At the finish each rank said "waiting" in the harness's name and slept: its deadline was
    # cleared, and only the side's whole allowance ended it (61 s under a 3 s step limit).
    ("waits_out_the_finish", "a 'waiting' message after the judge's first command"),
    # The same with a second answer to the last block, still the one the judge sent last.
    ("answers_the_last_block_at_the_finish", "twice"),
])
def test_a_rank_keeps_its_deadline_whatever_it_says_mid_command(attack, says):
    import time

    from evaluator.config import Limits

    started = time.monotonic()
    report = run(attack, limits=Limits(startup_s=120.0, step_s=3.0, total_s=60.0))
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
    assert says in report["failure"]["message"]
    assert time.monotonic() - started < 40


@WITHIN_ITS_OWN_PROCESS
def test_repeated_messages_are_not_progress_without_end():
    # Rank 0 sent "ready" 200,000 times in its first call: 200,006 progress events for the
    # candidate, each a line on `pkb eval --progress`'s output and in a worker's log.
    from evaluator.api import evaluate
    from evaluator.config import EvalConfig

    from .conftest import HOSTILE, TEST_LIMITS

    events = []
    report = evaluate(EvalConfig(problem="all-reduce", solution_path=HOSTILE / "floods_progress_lines.py",
                                 world_size=2, device="cpu", size="small", trials=2, limits=TEST_LIMITS),
                      lambda side, event: events.append(side))
    assert report["verdict"] == "pass", report["failure"]  # its calls are the reference's own
    assert events.count("candidate") < 100, events.count("candidate")


@pytest.mark.confined  # the init's watch of a side's memory: the sandbox's
def test_memory_held_behind_an_exited_main_thread_counts_against_the_rank():
    # Two helpers whose main thread had ended alone held 1.2 GiB each: their /proc status showed
    # no resident memory, and rank 0 passed with 2.4 GiB in them beside its own under a 2 GiB limit.
    from evaluator.config import ResourceLimits

    report = run("hides_memory_behind_an_exited_main_thread", timing=False,
                 resources=ResourceLimits(memory_bytes_per_rank=2 << 30))
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "resource_limit", report["failure"]
    assert "used more than the limit of 2 GiB" in report["failure"]["message"]


@pytest.mark.confined  # the init's watch of a side's memory, in the side's own network namespace
@pytest.mark.parametrize("attack", ["holds_memory_in_udp_queues", "holds_memory_in_netlink_queues",
                                    "holds_memory_in_unix_queues", "holds_memory_in_pipes",
                                    "holds_memory_in_sysv_shm"])
def test_memory_held_in_socket_queues_counts_against_the_side(attack):
    # The ninth pass: rank 0 queued 3 GiB it never read on its side's own network namespace, in UDP
    # sockets (one pool for the host) or netlink ones (no pool at all), charged to no memory cgroup
    # (v1 charges sockets only for TCP, and only when asked), or unix ones (charged to the side's
    # cgroup, under its cap, where the host gives one), or in pipes' buffers (the same; 110 helpers'
    # 220,000 pipes), or in System V shared memory it had detached (bounded only by the disk budget),
    # shown in no resident set: it passed under a 2 GiB limit per rank, all five ways.
    from evaluator.config import ResourceLimits

    report = run(attack, timing=False, resources=ResourceLimits(memory_bytes_per_rank=2 << 30))
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "resource_limit", report["failure"]
    expected = "used more than the limit of 2 GiB" if attack.endswith("pipes") else "outside every rank's resident set"
    assert expected in report["failure"]["message"], report["failure"]


def test_a_process_that_runs_under_a_ms_beside_the_reference_is_caught():
    # Woken by a one-shot timer aimed past the judge's reads after the candidate's block, a helper
    # ran 0.5 ms beside each reference block it reached: under the 1 ms margin, it passed (3 runs
    # of 3). On a GPU that is time to launch a kernel that runs beside the reference.
    report = run("spins_under_the_margin")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
    # Where its timer fires depends on the host's load: beside a reference block, while the judge
    # read the candidate's own block (fresh clone under load, 2026-11-29), or between the two; every
    # reading from the candidate's freeze to its thaw is held to the one before (read_still), so
    # no window is unread (it passed at 1.39x once in a full run before, the seventh pass).
    message = report["failure"]["message"]
    assert "while they stood stopped" in message or "after they were stopped" in message, message


# -- the sixth red-team pass (2026-11-28) ---------------------------------------------------------

@WITHIN_ITS_OWN_PROCESS
def test_a_ready_step_nested_to_the_parsers_edge_still_ends_in_a_verdict(tmp_path):
    # The first "ready" of rank 0, sent in the harness's name at import, went to the progress hook
    # step and all. Nested just short of the depth the judge's parser refuses, it was a step that
    # `pkb eval --progress` (a worker's command), encoding it a few frames deeper, could not:
    # RecursionError, a traceback and no report (3 depths of 3 around the edge, sandbox on and off).
    import re

    from contract import progress

    source = (HOSTILE / "nests_its_ready_step.py").read_text()
    reports: dict[int, dict] = {}

    def run_at(depth: int) -> dict:
        if depth not in reports:
            path = tmp_path / f"nests_its_ready_step_{depth}.py"
            path.write_text(re.sub(r"^DEPTH = \d+$", f"DEPTH = {depth}", source, flags=re.M))
            reports[depth] = dict(evaluate(
                EvalConfig(problem="all-reduce", solution_path=path, world_size=2, device="cpu",
                           size="small", trials=2, timing=False, limits=TEST_LIMITS),
                lambda side, event: progress.format_line(side, event)))
        return reports[depth]

    def refused(depth: int) -> bool:
        return "not a message" in ((run_at(depth)["failure"] or {}).get("message") or "")

    # The edge hangs on this process's stack: the deepest step the judge still parses (a refused
    # step is the candidate's protocol_violation at once). The judge parses a rank's line about 20
    # frames below this test (the edge and this test's depth came to 980 frames alone and 979 under
    # pytest -n on 2026-11-29, of a limit of 1000), so it is looked for there first, then in steps
    # that double, then by bisection; each depth runs once, and the probes' reports are judged
    # below. A bracket of 500-1500 took 16 evaluations (51-67 s of make test); this takes 5 or 6.
    import inspect
    import sys

    depth, step = sys.getrecursionlimit() - len(inspect.stack(0)) - 20, 1
    low, high = (None, depth) if refused(depth) else (depth, None)
    while low is None or high is None:
        depth = max(depth - step, 1) if low is None else depth + step
        step *= 2
        low, high = (low, depth) if refused(depth) else (depth, high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if refused(middle) else (middle, high)
    for depth in range(low, low - 4, -1):
        report = run_at(depth)
        assert report["verdict"] == "fail", depth
        assert report["failure"]["failure_class"] == "value_mismatch", (depth, report["failure"])


def test_a_file_nested_past_pythons_parser_is_a_syntax_error_not_a_traceback(tmp_path):
    # The parent parses the file before any rank starts and caught SyntaxError only: 8000 unary
    # minuses ran past the parser's stack (MemoryError), 5000 attribute lookups past the recursion
    # limit (RecursionError), and evaluate() ended with a traceback, no report (2 files of 2).
    report = run("nests_past_the_parser")
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "syntax_error", report["failure"]
    deep = tmp_path / "nests_attribute_lookups.py"
    deep.write_text((HOSTILE / "nests_past_the_parser.py").read_text().replace("-" * 8000 + "1", "NESTED" + ".a" * 5000))
    report = run("nests_past_the_parser", solution_path=deep)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "syntax_error", report["failure"]
    assert "RecursionError" in report["failure"]["message"]


@WITHIN_ITS_OWN_PROCESS
def test_a_forged_compile_time_past_a_floats_range_cannot_break_the_report():
    # "ready" again from inside a trial, its compile time a whole number of 400 digits: building the
    # report's compile time called math.isfinite on it, which raised OverflowError (no verdict).
    report = run("reports_a_huge_compile_time", timing=False)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]
    compile_s = report["wall_time"]["compile_s"]
    assert compile_s is None or compile_s < 3600, compile_s  # the harness's own words (0 on a CPU), not the forged


def test_public_seeds_rebuild_no_input_of_a_judged_call():
    # Every input of fsdp-tp-swiglu-mlp comes from shared streams, which the per-rank salts never
    # reached, and the seeds are in the candidate's job: at import it rebuilt the inputs of every
    # trial and timed call and answered each from a table, with no communication and no matmul
    # (zeros where a call was not foreseen). It passed every check at 3.8-4.6x (4 runs of 4).
    report = run("predicts_shared_inputs", problem="fsdp-tp-swiglu-mlp")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]
    assert report["failure"]["trial"] == 0


@WITHIN_ITS_OWN_PROCESS
def test_outputs_near_the_dtypes_largest_value_leave_a_report_that_is_json():
    # bfloat16 outputs of 3e38: the errors' squares and their ratios to the exact answer overflowed
    # float32, and the report's candidate rms and largest relative error were Infinity, which is no
    # JSON (the portal's database refuses it): the failing verdict could not be stored.
    import json
    from pathlib import Path

    import jsonschema

    import evaluator

    report = run("returns_huge_values", timing=False, dtype="bfloat16")
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]
    schema = json.loads((Path(evaluator.__file__).parent / "report.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(report, allow_nan=False)), schema)


def test_links_planted_where_the_reference_writes_its_exact_answers_are_caught():
    # Unconfined, rank 0 linked every exact-answer name in the reference's output folder to
    # /dev/null in its first call; the reference wrote through them, the copy out refused links,
    # and without exact answers a candidate wrong by 0.05 everywhere was judged by the tolerance
    # and passed (3 runs of 3, timed and not). Confined, the folder is out of its reach.
    report = run("plants_reference_links", dtype="bfloat16")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    if report["sandbox"] == "off":
        assert report["failure"]["failure_class"] == "protocol_violation", report["failure"]
        assert "the reference's folders held" in report["failure"]["message"]
    else:
        assert report["failure"]["failure_class"] == "value_mismatch", report["failure"]


# -- the seventh red-team pass (2026-11-29) -----------------------------------------------------

# What the portal reads of a worker's request (Django's DATA_UPLOAD_MAX_MEMORY_SIZE): a report past
# it is refused with a 413, and the evaluation is left with no verdict (tests/portal, hostile users).
PORTAL_BODY_BYTES = 2_621_440


def test_a_forged_error_cannot_make_the_report_too_large_for_the_portal():
    # Each rank sent, in the harness's name, an error whose message was 260,000 characters outside
    # the Basic Multilingual Plane: 4 bytes each on the status channel (under its 1 MiB line), 12
    # each in the report's JSON. The report was 3.1 MB: the worker's post of the verdict was
    # refused. A failure's text is now kept within report.FAILURE_TEXT_BYTES.
    import json

    report = run("reports_an_oversized_failure", timing=False)
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] == "runtime_error", report["failure"]
    assert "characters cut" in report["failure"]["message"]
    # The whole body the worker posts, with room to spare for a larger world's ranks.
    assert len(json.dumps({"report": report}).encode()) < PORTAL_BODY_BYTES // 10


def test_every_text_a_failure_carries_is_bounded_whatever_its_characters():
    # The other fields a rank fills: tracebacks and compiler output (its error message), and its
    # stacks and stderr tails (bytes it writes to its own pipes, non-UTF-8 read as U+FFFD, 6 bytes
    # of JSON each). Eight ranks' worth of each stays well within what the portal reads.
    import json

    from evaluator.report import FailureClass, bounded_failure, make_failure

    worst = {"astral": "\U0001F600" * 300_000, "replaced": "\ufffd" * 64_000, "ascii": "x" * 1_000_000}
    for name, text in worst.items():
        failure = bounded_failure(make_failure(
            FailureClass.DEADLOCK, text, traceback=text, compiler_output=text,
            stacks={str(rank): text for rank in range(8)}, stderr={str(rank): text for rank in range(8)}))
        assert failure is not None
        size = len(json.dumps(failure).encode())
        assert size < 200_000, (name, size)
        assert failure["traceback"].endswith(text[-10:]) and failure["message"].startswith(text[:10]), name


# -- the eighth red-team pass (2026-11-29) ------------------------------------------------------

@pytest.mark.confined  # unconfined the ranks are the evaluator's own user: the attack does nothing there
def test_a_per_user_kernel_limit_spent_by_the_candidate_is_not_the_references():
    # Both sides' ranks ran as one host uid, and the kernel counts some limits per host user: at
    # import the candidate's ranks spent every epoll watch of that user (fs.epoll.max_user_watches),
    # the reference's gloo could not watch its connections (ENOSPC), its rank died of SIGABRT in its
    # start-up, and a candidate that returns zeros ended as our harness_error. Each side's ranks
    # now run as a host uid of their own.
    report = run("exhausts_the_shared_uids_epoll_watches", timing=True)
    assert report["verdict"] == "fail"
    # Its wrong answers, or its own side's gloo starved of watches too (its finish's barrier hung on
    # rank 1 in two runs of seven here): the candidate's failure either way, never ours.
    assert report["failure"]["failure_class"] in ("value_mismatch", "deadlock"), report["failure"]


# Serial, in make test-long: it fills the host's TCP pool for a few seconds, which starves the gloo
# of every evaluation beside it (make test's parallel workers); the judge's check does not blame
# their candidates (their namespaces hold none of it), but their timings would carry it.
@pytest.mark.slow
@pytest.mark.long
def test_a_candidate_that_holds_the_hosts_tcp_memory_while_frozen_fails():
    # The kernel's TCP memory is one pool for the host, whatever the namespace: at import rank 0
    # queued 2.2 GB in connections to itself and never read them, and the reference's gloo ran
    # starved beside the frozen candidate (178 ms an 8 KiB all-reduce instead of 2), while the
    # candidate reduced through a file its ranks share: it passed at 155x (3.0x without the fill).
    # Over MPTCP (the same pool) /proc/net/tcp shows almost nothing of it: past half the pool's low
    # mark, the candidate's own share decides (queued bytes, MPTCP sockets, their number).
    report = run("fills_the_hosts_tcp_memory")
    assert report["verdict"] == "fail", (report.get("timing") or {}).get("speedup")
    assert report["failure"]["failure_class"] == "resource_limit", report["failure"]
    assert "TCP memory" in report["failure"]["message"]


# Serial, in make test-long: it fills the host's table of open files for a few seconds, and every
# process of the host without CAP_SYS_ADMIN (a database, the sides of an evaluation beside it) is
# refused files meanwhile.
@pytest.mark.slow
@pytest.mark.long
def test_a_candidate_that_holds_the_hosts_open_files_while_frozen_fails():
    # The ninth pass: helpers mapped one small file 2.5 million times (each mapping holds a file
    # open, with no descriptor) until the host's table was full, and the reference's sandbox,
    # started beside the frozen candidate, could not open its own: our harness_error ("the zygote
    # ended before it started every rank"). The judge now reads the table before the reference
    # runs. Filling it can also take the candidate's own side with it (its init, which lists /proc,
    # dies of ENFILE): a crash, its own; never the reference's failure.
    report = run("fills_the_hosts_file_table")
    assert report["verdict"] == "fail"
    failure = report["failure"]
    assert failure["failure_class"] in ("resource_limit", "crash"), failure
    if failure["failure_class"] == "resource_limit":
        assert "table of open files" in failure["message"], failure


@pytest.mark.parametrize("ran", [True, False])
def test_a_reference_block_that_fails_beside_a_candidate_that_ran_is_the_candidates(ran):
    # Helpers woken by their own timers inside a reference block (starves_a_reference_block_past_
    # its_deadline, 200 of them in sessions of their own) starved it past its deadline: the judge
    # raised the reference's failure, our harness_error, before its reading after the block, and
    # the candidate's threads were never read (1 run of 3 with a 1 s step limit on this 2-core
    # host; the attack's timing is the host's, so the judge's order is tested here, not its odds).
    from pathlib import Path

    from evaluator.judge.buffers import WrittenCall
    from evaluator.judge.driver import Judge
    from evaluator.paired import DrivenFailure
    from evaluator.report import FailureClass, make_failure

    class Buffers:  # one rank's, as a block uses them
        slot_bytes = 1 << 20

        def slot(self, call):
            return 0

        def release(self, written, wait=True):
            pass

        def settle(self):
            pass

        def new_block(self):
            pass

    class Reference:  # its block never ends: its deadline passes
        ranks = [None]
        take_called = staticmethod(lambda: [])
        thaw = command_each = staticmethod(lambda *args, **kwargs: None)
        waiting = staticmethod(lambda: False)
        poll = staticmethod(lambda timeout: make_failure(FailureClass.DEADLOCK, "did not finish a timed block"))

    class Candidate:  # stopped; its threads read before the block, and once it failed
        readings = [{(7, 7): 1_000}, {(7, 7): 90_001_000 if ran else 1_000}]
        cpu_seconds = staticmethod(lambda: 0.0)
        box, host_tcp_at_start = None, None

        def thread_run_ns(self):
            return self.readings.pop(0)

    judge = Judge(None, (), Path("."), {"reference": [Buffers()]}, 1.0)
    with pytest.raises(DrivenFailure) as raised:
        judge.run_calls(Reference(), Candidate(), "reference", [[WrittenCall({"tensors": [], "values": {}}, {})]],
                        within_s=1.0, what="timed block 2")
    assert raised.value.side == ("candidate" if ran else "reference"), raised.value.failure
    if ran:
        assert "during the reference's timed block 2" in raised.value.failure["message"]


# Serial, in make test-long: 200 processes spin on the host for a moment.
@pytest.mark.slow
@pytest.mark.long
def test_a_reference_block_starved_from_inside_the_freeze_fails_the_candidate():
    # The attack itself under the test limits (8 s a step: the starved block ends in time here, and
    # the candidate is read after it or before it), and never our harness_error.
    report = run("starves_a_reference_block_past_its_deadline")
    assert report["verdict"] == "fail"
    assert report["failure"]["failure_class"] in ("protocol_violation", "value_mismatch"), report["failure"]
