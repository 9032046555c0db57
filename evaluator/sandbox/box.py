"""What the launcher asks of a box, confined or not: start ranks, report their exits, stop them,
hand over the files they left.
"""

from __future__ import annotations

import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Protocol

# The only files a side hands back: one tensor file per task, trial (or timed call) and rank,
# and on the reference side a trial's exact answers beside it (``.exact.pt``, evaluator/exact.py).
OUTPUT_NAME = re.compile(r"task(\d+)_(trial\d+|timed\d+)_rank(\d+)(\.exact)?\.pt")


@dataclass(frozen=True)
class OutputRules:
    """What a side may hand back: how many output files, which tasks and ranks, how many bytes."""

    tasks: frozenset[int]
    world_size: int
    max_files: int
    max_bytes: int
    exact_answers: bool = False  # the reference side's ``.exact.pt`` files

    def wants(self, name: str) -> bool:
        match = OUTPUT_NAME.fullmatch(name)
        return (bool(match) and int(match.group(1)) in self.tasks and int(match.group(3)) < self.world_size
                and (self.exact_answers or match.group(4) is None))


class SandboxError(RuntimeError):
    """The box could not be set up (not the candidate's fault)."""


@dataclass(frozen=True)
class RankLaunch:
    rank: int
    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...]  # kept open, at the same numbers, in the rank
    log_fd: int  # the rank's stdout and stderr
    stdin_fd: int  # what the rank reads first (its status token), then closes


class Box(Protocol):
    confined: bool
    work: Path  # the side's private, writable directory, as its ranks see it
    inbox: Path  # read-only: the job and the solution, as the ranks see them
    home: Path

    def start(self, launches: list[RankLaunch]) -> None: ...

    def fileno(self) -> Optional[int]:
        """A descriptor that becomes readable when ``events`` has news, if the box has one."""

    def events(self) -> list[dict[str, Any]]:
        """Since the last call: ``{"event": "exit", "rank", "code"}`` (code < 0: killed by that
        signal) and ``{"event": "limit", "what", "message", "rank"}``."""

    def dump_stacks(self) -> None: ...

    def process_ids(self) -> list[int]:
        """Host ids of the side's processes (for the judge's CPU-time reading)."""

    def reaper_id(self) -> Optional[int]:
        """Host id of the process of ours that reaps the side's ranks and orphans (its reaped
        children's time is the side's), or None."""

    def freeze(self) -> bool:
        """Stop every process of the side; True once every thread of them stands still."""

    def thaw(self) -> None: ...

    def stop(self) -> None:
        """Kill every process of the side; its files stay readable until ``close``."""

    def copy_outputs(self, dest: Path, rules: OutputRules) -> None:
        """Copy the output files the ranks left in ``work/out`` into ``dest`` (after ``stop``)."""

    def close(self) -> None: ...


def copy_regular_files(source_dir_fd: int, dest: Path, rules: OutputRules) -> None:
    """Copy the files ``rules`` wants from an open directory, never following a link.

    The directory was written by candidate code: a name may be a symlink (to the reference's
    outputs, to a host file), a FIFO that blocks, a hard link, or a sparse file far larger than
    the disk it sits on. Only plain, fully allocated files with one link are copied, each read
    through a descriptor opened with O_NOFOLLOW, up to ``rules.max_files`` files and
    ``rules.max_bytes`` in all; what is left out surfaces as missing outputs.

    The files are chosen one by one, then copied side by side, a batch at a time: a reference that
    re-checks into files (judged in the ranks, or outside where its ring is too short for the
    slots) leaves two files of up to 64 MiB per re-check and rank at the default size (17 GiB for
    69 re-checks), one thread copied a 64 MiB file from memory to memory in 79 ms on this
    repository's machine, and os.pread and write release the GIL.
    """
    dest.mkdir(parents=True, exist_ok=True)
    batch: list[tuple[int, str, int]] = []  # (descriptor, name, bytes it had when we looked)
    files = budget = 0
    with ThreadPoolExecutor(max_workers=COPY_THREADS) as pool:
        try:
            for name in sorted(os.listdir(source_dir_fd)):
                if not rules.wants(name) or files >= rules.max_files:
                    continue
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                 dir_fd=source_dir_fd)
                except OSError:
                    continue
                batch.append((fd, name, 0))
                info = os.fstat(fd)
                allocated = info.st_blocks * 512
                if (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or allocated + 65536 < info.st_size
                        or budget + info.st_size > rules.max_bytes):
                    os.close(batch.pop()[0])
                    continue
                files += 1
                budget += info.st_size
                batch[-1] = (fd, name, info.st_size)
                if len(batch) == COPY_BATCH:  # a bounded number of descriptors open at once
                    _copy_batch(pool, batch, dest)
            _copy_batch(pool, batch, dest)
        finally:
            for fd, _, _ in batch:
                os.close(fd)


COPY_THREADS = 4
COPY_BATCH = 4 * COPY_THREADS


def _copy_batch(pool: ThreadPoolExecutor, batch: list[tuple[int, str, int]], dest: Path) -> None:
    """Copy the chosen files side by side, then close them (``batch`` is emptied)."""
    try:
        list(pool.map(lambda file: _copy_file(*file, dest), batch))
    finally:
        while batch:
            os.close(batch.pop()[0])


def _copy_file(fd: int, name: str, size: int, dest: Path) -> None:
    with open(dest / name, "wb") as out:
        remaining = size  # never more than it had when we looked
        while remaining > 0 and (block := os.pread(fd, min(1 << 22, remaining), size - remaining)):
            out.write(block)
            remaining -= len(block)
