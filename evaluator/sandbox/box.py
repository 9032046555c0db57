"""What the launcher asks of a box, confined or not: start ranks, report their exits, stop them,
hand over the files they left.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Protocol

# The only files a side hands back: one tensor file per task, trial (or timed call) and rank.
OUTPUT_NAME = re.compile(r"task\d+_(trial\d+|timed\d+)_rank\d+\.pt")
MAX_OUTPUT_BYTES = 64 * 2**30


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

    def stop(self) -> None:
        """Kill every process of the side; its files stay readable until ``close``."""

    def copy_outputs(self, dest: Path) -> None:
        """Copy the output files the ranks left in ``work/out`` into ``dest`` (after ``stop``)."""

    def close(self) -> None: ...


def copy_regular_files(source_dir_fd: int, dest: Path) -> None:
    """Copy files named like outputs from an open directory, never following a link.

    The directory was written by candidate code: a name may be a symlink (to the reference's
    outputs, to a host file), a FIFO that blocks, or a hard link. Only plain files with one link
    are copied, each read through a descriptor opened with O_NOFOLLOW.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(source_dir_fd):
        if not OUTPUT_NAME.fullmatch(name):
            continue
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=source_dir_fd)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size > MAX_OUTPUT_BYTES:
                continue
            with open(dest / name, "wb") as out:
                while block := os.read(fd, 1 << 22):
                    out.write(block)
        finally:
            os.close(fd)
