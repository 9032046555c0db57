"""The judge's shared buffers and its draw of checked calls, without any rank process."""

from __future__ import annotations

import json
import struct
from collections import Counter

import pytest
import torch

from evaluator.judge.buffers import OutputError, RankBuffers
from evaluator.judge.driver import CheckedCalls, pass_probability_bound
from evaluator.shim.buffers import SharedBuffers
from evaluator.candidate import CandidateError
from evaluator.wire import HEADER_BYTES


@pytest.fixture
def pair():
    """The judge's end and a rank's end of the same memory files, in one process."""
    import os

    judge = RankBuffers("test", calls=3, call_input_bytes=4096, slot_bytes=8192)
    rank = SharedBuffers(*(f"{os.dup(fd)}:{memory.size}" for fd, memory in zip(judge.fds(), (judge.input, judge.output))))
    rank.map(torch.device("cpu"))
    yield judge, rank
    judge.close()


def test_inputs_and_outputs_cross_both_ways_unchanged(pair):
    judge, rank = pair
    inputs = {"x": torch.randn(7, 5, dtype=torch.bfloat16), "idx": torch.arange(9), "flag": torch.tensor([True]),
              "k": 3, "shape": (2, 3), "dtype": torch.float32}
    written = judge.stage_inputs(1, inputs)
    judge.release(written)
    seen = rank.inputs(json.loads(json.dumps(written.manifest)))
    for name in ("x", "idx", "flag"):
        assert torch.equal(seen[name], inputs[name]) and seen[name].dtype == inputs[name].dtype
    assert seen["k"] == 3 and seen["shape"] == (2, 3) and seen["dtype"] is torch.float32
    outputs = [seen["x"].float() * 2, seen["idx"][:4]]
    rank.write_outputs(outputs, judge.slot(2), judge.slot_bytes)
    back = judge.read_outputs(2)
    assert [t.dtype for t in back] == [torch.float32, torch.int64]
    assert torch.equal(back[0], outputs[0]) and torch.equal(back[1], outputs[1])
    assert judge.changed_inputs(written, may_overwrite=()) == []


def test_an_input_written_over_in_the_buffer_is_named(pair):
    judge, rank = pair
    written = judge.stage_inputs(0, {"x": torch.ones(16), "y": torch.ones(16)})
    judge.release(written)
    seen = rank.inputs(written.manifest)
    seen["y"].add_(1)
    assert judge.changed_inputs(written, may_overwrite=()) == ["y"]
    assert judge.changed_inputs(written, may_overwrite=("y",)) == []


def test_the_judges_copy_does_not_change_when_the_slot_does(pair):
    judge, rank = pair
    rank.write_outputs([torch.zeros(8)], judge.slot(0), judge.slot_bytes)
    copy = judge.read_outputs(0)[0]
    rank.write_outputs([torch.ones(8)], judge.slot(0), judge.slot_bytes)
    assert torch.equal(copy, torch.zeros(8))


def test_outputs_larger_than_the_slot_are_refused_by_the_harness(pair):
    judge, rank = pair
    with pytest.raises(CandidateError, match="fit in"):
        rank.write_outputs([torch.zeros(1 << 20)], judge.slot(0), judge.slot_bytes)


@pytest.mark.parametrize("entries, why", [
    ([["bfloat16", [2**39], HEADER_BYTES, 2**40]], "more than"),
    ([["float32", [-4], HEADER_BYTES, 16]], "negative"),
    ([["float32", [4], HEADER_BYTES, 17]], "more than"),
    ([["float32", [4], 16, 16]], "more than"),  # inside the header
    ([["float32", [4], HEADER_BYTES, 16], ["float32", [4], HEADER_BYTES + 8, 16]], "overlap"),
    ([["complex32", [4], HEADER_BYTES, 16]], "not the harness's"),
    ([["float32", [1], HEADER_BYTES, 4]] * 65, "not the harness's"),
    # Empty outputs pass the byte bounds; these dimensions broke the judge itself (red team,
    # crashes_judge_output_reader): Infinity, strides that overflow, an int too long for torch.
    ([["float32", [0, float("inf")], HEADER_BYTES, 0]], "not the harness's"),
    ([["float32", [0, 2**62, 2**62], HEADER_BYTES, 0]], "more than"),
    ([["float32", [0, 10**30], HEADER_BYTES, 0]], "more than"),
    ([["float32", [True, 4], HEADER_BYTES, 16]], "not the harness's"),
    ([["float32", [1] * 17, HEADER_BYTES, 4]], "not the harness's"),
])
def test_a_forged_description_is_refused_before_any_data_is_read(pair, entries, why):
    judge, _ = pair
    body = json.dumps({"outputs": entries}).encode()
    raw = bytearray(struct.pack("<I", len(body)) + body)
    judge.output.view(0, len(raw)).copy_(torch.frombuffer(raw, dtype=torch.uint8))
    with pytest.raises(OutputError, match=why):
        judge.read_outputs(0)


def test_a_description_nested_past_the_decoders_recursion_limit_is_refused(pair):
    # json.loads raises RecursionError, no ValueError, on "[" * 60000: it used to escape the judge.
    judge, _ = pair
    body = b"[" * (HEADER_BYTES - 8)
    raw = bytearray(struct.pack("<I", len(body)) + body)
    judge.output.view(0, len(raw)).copy_(torch.frombuffer(raw, dtype=torch.uint8))
    with pytest.raises(OutputError, match="not the harness's"):
        judge.read_outputs(0)


def test_an_empty_slot_is_no_outputs(pair):
    judge, _ = pair
    with pytest.raises(OutputError, match="no outputs"):
        judge.read_outputs(1)


def test_the_checked_calls_are_a_uniform_sample_of_every_counted_call():
    counts: Counter[int] = Counter()
    draws, calls, size = 3000, 200, 16
    for _ in range(draws):
        checked = CheckedCalls(size)
        for call in range(calls):
            checked.offer(call)
        assert len(set(checked.kept)) == size
        counts.update(checked.kept)
    expected = draws * size / calls  # 240 for every call, first and last alike
    assert all(abs(counts[c] - expected) < 5 * expected ** 0.5 for c in range(calls)), counts.most_common(3)


def test_the_bound_on_passing_while_honest_on_a_fraction():
    assert pass_probability_bound(64, 0.9) == pytest.approx(0.00118, rel=1e-2)
    assert pass_probability_bound(64, 0.5) < 1e-18


def test_a_staged_call_is_not_in_the_buffer_until_it_is_released(pair):
    """What the rank could read of a call before the judge releases it: nothing of its inputs."""
    judge, rank = pair
    written = judge.stage_inputs(1, {"x": torch.full((64,), 7.0)})
    seen = rank.inputs(written.manifest)
    assert not torch.equal(seen["x"], torch.full((64,), 7.0))
    judge.release(written)
    assert torch.equal(seen["x"], torch.full((64,), 7.0))  # a view of the buffer: now it holds them


def test_calls_share_a_ring_of_regions_and_slots(pair):
    """Call i uses region and slot i % ring: a block may carry more calls than the buffers hold."""
    judge, _ = pair
    x = {"x": torch.arange(16, dtype=torch.float32)}
    assert judge.stage_inputs(1, x).manifest == judge.stage_inputs(1 + judge.calls, x).manifest
    assert judge.stage_inputs(0, x).manifest != judge.stage_inputs(1, x).manifest
    assert [judge.slot(c) for c in range(2 * judge.calls)] == [c % judge.calls * judge.slot_bytes
                                                               for c in range(2 * judge.calls)]


def test_a_reused_region_holds_the_next_calls_inputs_and_the_earlier_call_reads_as_changed(pair):
    """Why the judge checks a call's inputs before its region is written again, not after the block."""
    judge, _ = pair
    first = judge.stage_inputs(0, {"x": torch.zeros(64)})
    judge.release(first)
    assert judge.changed_inputs(first, ()) == []
    judge.release(judge.stage_inputs(judge.calls, {"x": torch.ones(64)}))
    assert judge.changed_inputs(first, ()) == ["x"]


def test_blocks_at_the_default_all_reduce_size_are_not_cut_to_what_the_shared_buffers_hold():
    """64 MiB in, an output slot of 4 x the HBM bytes: 14 calls fitted the buffers on a GPU; the
    ring keeps a few regions and the block is bounded by the judge's own copies of its inputs."""
    from evaluator.config import TimingConfig
    from evaluator.judge.driver import GPU_BUFFER_BUDGET_BYTES, RING_REGIONS, calls_per_block

    mib = 2**20
    shape = calls_per_block(TimingConfig(), 64 * mib, 4 * 192 * mib, device="cuda")
    assert shape.ring == RING_REGIONS
    assert shape.calls == GPU_BUFFER_BUDGET_BYTES // (64 * mib) == 64
    huge = calls_per_block(TimingConfig(), 3 * GPU_BUFFER_BUDGET_BYTES, GPU_BUFFER_BUDGET_BYTES, device="cuda")
    assert huge.ring == huge.calls == 1  # one call at a time still works: each is released after the last returned
    assert calls_per_block(None, 4096, 8192).calls == 1  # untimed: one call per command
    # Released by block, each call of a block has its own region and slot, all within the block
    # budget: at this size (a slot of 768 MiB) 19 calls a block on a GPU.
    from evaluator.judge.driver import GPU_BLOCK_BUDGET_BYTES

    block = calls_per_block(TimingConfig(), 64 * mib, 4 * 192 * mib, device="cuda", release="block")
    assert block.ring == block.calls == GPU_BLOCK_BUDGET_BYTES // (64 * mib + 4 * 192 * mib) == 19


def test_a_rank_cannot_shrink_or_grow_the_memory_it_shares_with_the_judge(pair):
    """A shrunk memory file makes the judge's next touch of its own mapping a SIGBUS, which no
    Python code survives (red team, truncates_shared_buffers): the files are sealed at their size."""
    import os

    judge, _ = pair
    for memory in (judge.input, judge.output):
        fd = os.dup(memory.fd())  # the rank's inherited descriptor is as writable as this one
        try:
            for size in (0, memory.size * 2):
                with pytest.raises(PermissionError):
                    os.ftruncate(fd, size)
        finally:
            os.close(fd)
        assert os.fstat(memory.fd()).st_size == memory.size


def test_outputs_past_half_the_slot_are_refused_before_the_judge_keeps_them(pair):
    """Every reference's outputs take at most half the slot (tests/problems/test_oracles.py); a
    rank that fills the slot would make the judge keep a slot per trial and drawn call in host
    memory (red team, fills_judge_shm): it is refused as it is read."""
    judge, rank = pair
    rank.write_outputs([torch.zeros(judge.max_output_bytes // 4)], judge.slot(0), judge.slot_bytes)
    assert judge.read_outputs(0)[0].numel() == judge.max_output_bytes // 4
    rank.write_outputs([torch.zeros(judge.max_output_bytes // 4 + 1)], judge.slot(1), judge.slot_bytes)
    with pytest.raises(OutputError, match="twice what any reference"):
        judge.read_outputs(1)


def test_the_judge_keeps_no_more_of_a_candidates_outputs_than_its_budget(tmp_path):
    from evaluator.judge.driver import Judge
    from evaluator.paired import DrivenFailure

    judge = Judge(None, (), tmp_path, {}, step_s=1.0, keep_budget=1000)  # type: ignore[arg-type]
    judge.save_outputs("trial0", [[torch.zeros(100)], [torch.zeros(100)]])  # 800 bytes
    judge.drop_outputs("trial0")
    judge.save_outputs("timed3", [[torch.zeros(100)], [torch.zeros(100)]])  # a dropped label frees its share
    with pytest.raises(DrivenFailure) as caught:
        judge.save_outputs("timed9", [[torch.zeros(100)], [torch.zeros(100)]])
    assert caught.value.side == "candidate"
    assert caught.value.failure["failure_class"] == "resource_limit"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["task0_timed3_rank0.pt", "task0_timed3_rank1.pt"]


def test_held_copies_stay_in_memory_past_the_budget_go_to_files_and_a_dropped_one_leaves_nothing(tmp_path):
    """Copies held in memory while the timing runs and until the comparison (no file written and
    read back), past the holding budget written at once; a dropped label leaves nothing."""
    from evaluator.judge.driver import Judge

    judge = Judge(None, (), tmp_path, {}, step_s=1.0, keep_budget=10_000, hold_budget=1600)  # type: ignore[arg-type]
    judge.save_outputs("timed1", [[torch.ones(100)], [torch.ones(100)]])  # 800 bytes: held
    judge.save_outputs("timed2", [[torch.full((100,), 2.0)], [torch.full((100,), 2.0)]])  # held: 1600
    judge.save_outputs("timed3", [[torch.full((100,), 3.0)], [torch.full((100,), 3.0)]])  # past it: written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["task0_timed3_rank0.pt", "task0_timed3_rank1.pt"]
    judge.drop_outputs("timed2")
    judge.drop_outputs("timed4")  # never kept: nothing to drop
    assert sorted(judge.held) == ["timed1"] and torch.equal(judge.held["timed1"][1][0], torch.ones(100))
    judge.drop_outputs("timed3")
    assert list(tmp_path.iterdir()) == []
    assert judge.kept_bytes == {"timed1": 800}


@pytest.mark.parametrize("nbytes", [1, 7, 8, 64, 67, 4096 + 3])
def test_bytes_differ_sees_a_change_in_any_byte_words_and_tail(nbytes):
    from evaluator.judge.buffers import bytes_differ

    ours = torch.randint(0, 256, (nbytes,), dtype=torch.uint8)
    assert not bool(bytes_differ(ours, ours.clone()))
    for where in {0, nbytes // 2, nbytes - 1}:
        theirs = ours.clone()
        theirs[where] ^= 1
        assert bool(bytes_differ(ours, theirs)), where


@pytest.fixture
def heap_pair():
    """As ``pair``, with the rank's output heap (GPUs released by block; here a memory file, and
    the rank's view of it standing in for the pool's allocations: shim/heap.py)."""
    import os

    from evaluator.shared_memory import attach
    from evaluator.shim.heap import HeapRange

    judge = RankBuffers("test", calls=3, call_input_bytes=4096, slot_bytes=8192, heap_bytes=1 << 16)
    dups = [f"{os.dup(fd)}:{memory.size}" for fd, memory in zip(judge.fds(), (judge.input, judge.output, judge.heap))]
    rank = SharedBuffers(*dups)
    rank.map(torch.device("cpu"))  # the CPU has no pool: map() leaves the heap to the caller
    fd, _, size = dups[2].partition(":")
    rank.heap = HeapRange(attach("cpu", int(fd), int(size)))
    yield judge, rank
    judge.close()


def heap_tensor(rank, offset: int, values: torch.Tensor) -> torch.Tensor:
    """An output the candidate's call allocated in the heap, at ``offset``."""
    nbytes = values.numel() * values.element_size()
    out = rank.heap.memory.view(offset, nbytes).view(values.dtype).view(values.shape)
    out.copy_(values)
    return out


def test_outputs_in_the_heap_are_read_where_they_lie_and_others_still_through_the_slot(heap_pair):
    judge, rank = heap_pair
    in_heap = heap_tensor(rank, 4096, torch.arange(12, dtype=torch.float32).view(3, 4))
    elsewhere = torch.full((5,), 7, dtype=torch.int64)
    rank.write_outputs([in_heap, elsewhere], judge.slot(0), judge.slot_bytes)
    entries = json.loads(bytes(judge.output.view(judge.slot(0) + 4, HEADER_BYTES - 4).numpy()).split(b"\0")[0])
    assert [e[-1] for e in entries["outputs"]] == ["heap", 40]  # the first left in place, the second copied
    back = judge.read_outputs(0)
    assert torch.equal(back[0], in_heap) and torch.equal(back[1], elsewhere)
    in_heap.zero_()  # what the judge read is its own copy
    assert back[0].sum() == 66


def test_two_calls_outputs_in_one_place_are_refused_until_the_next_block(heap_pair):
    """A shim that says two calls' outputs lie in one place (ours never does: it copies memory
    returned twice) would have the judge read one call's answer for the other."""
    judge, rank = heap_pair
    rank.write_outputs([heap_tensor(rank, 8192, torch.ones(16))], judge.slot(0), judge.slot_bytes)
    judge.read_outputs(0)
    forged_heap_entry(judge, 1, ["float32", [16], 8192 + 32, 64, "heap"])
    with pytest.raises(OutputError, match="overlaps one of call 0's"):
        judge.read_outputs(1)
    judge.new_block()
    assert torch.equal(judge.read_outputs(1)[0][:8], torch.ones(8))


def forged_heap_entry(judge, slot_call: int, entry: list) -> None:
    body = json.dumps({"outputs": [entry]}).encode()
    raw = struct.pack("<I", len(body)) + body
    judge.output.view(judge.slot(slot_call), len(raw)).copy_(torch.frombuffer(bytearray(raw), dtype=torch.uint8))


@pytest.mark.parametrize("entry, why", [
    (["float32", [16], (1 << 16) - 32, 64, "heap"], "outside"),  # runs past the heap's end
    (["float32", [16], -64, 64, "heap"], "outside"),
    (["float32", [1 << 20], 0, 4 << 20, "heap"], "more than"),  # past what any output may take
    (["float32", [16], 0, 60, "heap"], "more than"),  # bytes that are not the shape's
])
def test_a_forged_heap_entry_is_refused_before_the_judge_reads_it(heap_pair, entry, why):
    judge, _ = heap_pair
    forged_heap_entry(judge, 0, entry)
    with pytest.raises(OutputError, match=why):
        judge.read_outputs(0)


def test_a_heap_entry_where_the_judge_made_no_heap_is_refused(pair):
    judge, _ = pair
    forged_heap_entry(judge, 0, ["float32", [16], 0, 64, "heap"])
    with pytest.raises(OutputError, match="outside"):
        judge.read_outputs(0)


def test_the_heap_holds_a_blocks_outputs_within_its_budget():
    from evaluator.judge.buffers import HEAP_BUDGET_BYTES, heap_bytes
    from evaluator.wire import HEAP_SEGMENT

    assert heap_bytes(4, 1) == 4 * HEAP_SEGMENT + 64 * HEAP_SEGMENT
    assert heap_bytes(19, 208 << 20) == 19 * (208 << 20) + 64 * HEAP_SEGMENT
    assert heap_bytes(1000, 1 << 30) == HEAP_BUDGET_BYTES


def test_a_candidate_that_returns_one_buffer_twice_in_a_block_has_its_outputs_copied_from_then_on(heap_pair):
    """Reusing an output buffer overwrites the earlier call's bytes in place: the shim sees it at
    the second return (in the warm-up, whose calls are never drawn) and copies every output
    after it into its slot, as the values were when returned."""
    judge, rank = heap_pair
    reused = heap_tensor(rank, 0, torch.full((16,), 1.0))
    rank.write_outputs([reused], judge.slot(0), judge.slot_bytes)
    reused.fill_(2.0)
    rank.write_outputs([reused], judge.slot(1), judge.slot_bytes)
    reused.fill_(3.0)
    assert torch.equal(judge.read_outputs(1)[0], torch.full((16,), 2.0))  # copied as it returned
    assert torch.equal(judge.read_outputs(0)[0], torch.full((16,), 3.0))  # the first call's, overwritten
    rank.new_block()
    judge.new_block()
    fresh = heap_tensor(rank, 4096, torch.full((16,), 4.0))
    rank.write_outputs([fresh], judge.slot(0), judge.slot_bytes)
    fresh.fill_(5.0)
    assert torch.equal(judge.read_outputs(0)[0], torch.full((16,), 4.0))  # no longer read in place
