"""What the launcher knows of one side's ranks while they run, and what it hands back."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from .report import Failure


@dataclass
class RankState:
    rank: int
    status_fd: int
    log_fd: int
    stack_fd: int
    buffer: bytes = b""
    log_tail: bytes = b""
    stacks: bytes = b""
    returncode: Optional[int] = None
    started: bool = False
    timing: bool = False  # inside the timed phase, which has a limit of its own
    command_fd: Optional[int] = None  # our end of the rank's command pipe (driven timing)
    waiting: bool = False  # idle until our next command: never stalled
    commanded: bool = False  # it has had a command (driven sides): its "waiting" was said before
    deadline: Optional[float] = None  # when the command it is working on must be answered
    command: str = ""  # what that command asked for ("trial 1", "timed block 7"): a judged side
    command_limit_s: float = 0.0  # the seconds it was given
    builds_allowed: bool = False  # a build announced during this command runs on the build limit
    timing_announced: bool = False  # its driven timed phase was reported as progress
    finished: bool = False
    claimed: int = 0  # "called" messages for the command it is working on, in order of arrival
    calls_left: int = 0  # "called" messages the harness may still send for that command (judged sides)
    answered_after: Optional[int] = None  # how many had come when it answered that command
    building_since: Optional[float] = None  # our clock when the rank said it started a build
    build_s: float = 0.0  # seconds it spent building, on our clock
    labels: list[str] = field(default_factory=list)  # "task:step" of every completed step
    last_progress: float = field(default_factory=time.monotonic)


@dataclass
class SideResult:
    side: str
    failure: Optional[Failure]
    ready: dict[int, dict[str, Any]]
    done: dict[int, dict[str, Any]]
    times: dict[tuple[int, int], dict[str, Any]]  # (task, rank) -> TIMES event
    errors: list[dict[str, Any]]  # ERROR events by arrival
    wall_s: float
    steps: dict[int, list[str]] = field(default_factory=dict)  # rank -> "task:step" labels completed
    fingerprints: dict[tuple[int, str, int], list[dict[str, Any]]] = field(default_factory=dict)
    confined: bool = False
    blocks: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)  # (block, rank) -> TIMES
    build_s: dict[int, float] = field(default_factory=dict)  # rank -> seconds in builds, on our clock

    @property
    def ok(self) -> bool:
        return self.failure is None

    def completed_steps(self, rank: int) -> list[str]:
        return self.steps.get(rank, [])


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def append_tail(buffer: bytes, chunk: bytes, keep: int) -> bytes:
    buffer += chunk
    return buffer[-keep:] if len(buffer) > keep else buffer
