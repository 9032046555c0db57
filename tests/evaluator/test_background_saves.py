"""The reference's saves on writer threads (evaluator/background_saves.py): every queued save has
ended when drain returns, the queue is bounded, and a failed save is an error, not a lost file."""

from __future__ import annotations

import threading
import time

import pytest

from evaluator.background_saves import IN_FLIGHT, WRITERS, BackgroundSaves


def test_drain_returns_only_once_every_save_has_written(tmp_path):
    saves = BackgroundSaves()
    for index in range(3 * IN_FLIGHT):
        def save(index: int = index) -> None:
            time.sleep(0.01)
            (tmp_path / f"{index}.pt").write_text(str(index))
        saves.submit(save)
    saves.drain()
    assert sorted(int(p.stem) for p in tmp_path.iterdir()) == list(range(3 * IN_FLIGHT))


def test_saves_run_side_by_side_and_no_more_are_queued_than_the_bound():
    saves = BackgroundSaves()
    running, most, lock, release = [0], [0], threading.Lock(), threading.Event()

    def save() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(5)
        with lock:
            running[0] -= 1

    for _ in range(IN_FLIGHT):
        saves.submit(save)
    assert len(saves._pending) == IN_FLIGHT
    deadline = time.monotonic() + 10
    while most[0] < WRITERS and time.monotonic() < deadline:
        time.sleep(0.01)
    assert most[0] == WRITERS  # the writers all busy at once
    release.set()
    saves.submit(save)  # past the bound: waits for the oldest first
    assert len(saves._pending) <= IN_FLIGHT
    saves.drain()
    assert running[0] == 0


def test_a_failed_save_is_raised_at_the_drain_after_the_others_ended(tmp_path):
    saves = BackgroundSaves()

    def fails() -> None:
        raise OSError(28, "No space left on device")

    def slow() -> None:
        time.sleep(0.1)
        (tmp_path / "slow").write_text("done")

    saves.submit(fails)
    saves.submit(slow)
    with pytest.raises(OSError, match="No space left"):
        saves.drain()
    assert (tmp_path / "slow").read_text() == "done"  # drained, not abandoned


def test_a_quiet_drain_waits_but_keeps_the_error_back_for_the_one_already_raised():
    saves = BackgroundSaves()
    saves.submit(lambda: (_ for _ in ()).throw(ValueError("save failed")))
    saves.drain(quietly=True)
    saves.drain()  # nothing left: the failed save was drained once


def test_each_writer_thread_runs_the_initializer_first():
    local = threading.local()
    seen = []
    saves = BackgroundSaves(initializer=lambda: setattr(local, "device", "cuda:1"))
    for _ in range(WRITERS * 2):
        saves.submit(lambda: seen.append(getattr(local, "device", None)))
    saves.drain()
    assert seen == ["cuda:1"] * (WRITERS * 2)
