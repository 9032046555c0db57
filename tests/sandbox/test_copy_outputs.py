"""What a side's output directory hands back (evaluator/sandbox/box.py, copy_regular_files): plain
files only, whole, within the file and byte budgets, in batches copied side by side."""

from __future__ import annotations

import os

from evaluator.sandbox.box import COPY_BATCH, OutputRules, copy_regular_files


def _rules(max_files: int = 1000, max_bytes: int = 1 << 30) -> OutputRules:
    return OutputRules(tasks=frozenset({0}), world_size=2, max_files=max_files, max_bytes=max_bytes,
                       exact_answers=True)


def _copy(source, dest, rules: OutputRules) -> None:
    fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        copy_regular_files(fd, dest, rules)
    finally:
        os.close(fd)


def test_many_files_in_several_batches_arrive_whole(tmp_path):
    source, dest = tmp_path / "out", tmp_path / "copied"
    source.mkdir()
    count = 2 * COPY_BATCH + 3
    for trial in range(count):
        (source / f"task0_trial{trial}_rank0.pt").write_bytes(bytes([trial]) * (trial * 70_001 + 1))
    _copy(source, dest, _rules())
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in source.iterdir())
    for trial in range(count):
        assert (dest / f"task0_trial{trial}_rank0.pt").read_bytes() == bytes([trial]) * (trial * 70_001 + 1)


def test_links_fifos_sparse_files_and_other_names_are_left_out(tmp_path):
    source, dest = tmp_path / "out", tmp_path / "copied"
    source.mkdir()
    (source / "task0_trial0_rank0.pt").write_bytes(b"kept")
    (tmp_path / "host_file").write_bytes(b"secret")
    (source / "task0_trial1_rank0.pt").symlink_to(tmp_path / "host_file")
    os.mkfifo(source / "task0_trial2_rank0.pt")
    os.link(source / "task0_trial0_rank0.pt", source / "task0_trial3_rank0.pt")  # two links: neither copied
    with open(source / "task0_trial4_rank0.pt", "wb") as sparse:
        sparse.truncate(1 << 30)
    (source / "task0_trial5_rank7.pt").write_bytes(b"no such rank")
    (source / "notes.txt").write_bytes(b"not an output")
    (source / "task0_trial6_rank1.exact.pt").write_bytes(b"exact")
    _copy(source, dest, _rules())
    assert sorted(p.name for p in dest.iterdir()) == ["task0_trial6_rank1.exact.pt"]


def test_the_file_and_byte_budgets_hold_in_name_order(tmp_path):
    source = tmp_path / "out"
    source.mkdir()
    for trial in range(COPY_BATCH + 5):
        (source / f"task0_trial{trial:02d}_rank0.pt").write_bytes(b"x" * 1000)
    by_files, by_bytes = tmp_path / "by_files", tmp_path / "by_bytes"
    _copy(source, by_files, _rules(max_files=COPY_BATCH + 1))
    _copy(source, by_bytes, _rules(max_bytes=3500))
    names = sorted(p.name for p in source.iterdir())
    assert sorted(p.name for p in by_files.iterdir()) == names[:COPY_BATCH + 1]
    assert sorted(p.name for p in by_bytes.iterdir()) == names[:3]


def test_no_descriptor_is_left_open(tmp_path):
    source = tmp_path / "out"
    source.mkdir()
    for trial in range(COPY_BATCH * 3):
        (source / f"task0_trial{trial}_rank0.pt").write_bytes(b"y")
    before = len(os.listdir("/proc/self/fd"))
    _copy(source, tmp_path / "copied", _rules())
    assert len(os.listdir("/proc/self/fd")) == before
