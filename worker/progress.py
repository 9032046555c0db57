"""What `pkb eval --progress` says, turned into the submission's status and a readable step.

The evaluator prints ``PKB-PROGRESS {"side", "event", "step", "task"}`` to stderr as rank 0 of
each side reports. On a GPU, until the candidate's ``ready`` (its import and CUDA builds are
done) the job is ``compiling``; from then on it is ``running``. On a CPU nothing compiles (no
CUDA, no Triton), so the job is ``running`` from its first step: starting the ranks and
importing torch took 8 s there, and saying "compiling" meanwhile was false.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Progress:
    status: str  # "compiling" or "running"
    step: str  # e.g. "candidate: trial 2 of 5", "reference: timing"


def describe(event: dict[str, Any], trials: int) -> str | None:
    """A short step for people, or None for events that change nothing visible."""
    side, kind, step = event["side"], event.get("event"), str(event.get("step") or "")
    if kind == "ready":
        return f"{side}: started"
    if kind == "done":
        return f"{side}: done"
    if kind == "step" and step.startswith("trial "):
        index = step.removeprefix("trial ")
        # isdecimal, not isdigit: "²" is a digit that int() refuses, and a rank names its own steps
        return f"{side}: trial {int(index) + 1} of {trials}" if index.isdecimal() else f"{side}: {step}"
    if kind == "step" and step == "timing started":
        return f"{side}: timing"
    return None


def initial_status(device: str) -> str:
    """The status before the candidate is ready: only a GPU job can be building kernels."""
    return "compiling" if device == "cuda" else "running"


class Tracker:
    """Folds events into the latest Progress; on a GPU `compiling` until the candidate is ready."""

    def __init__(self, trials: int, device: str = "cuda") -> None:
        self.trials = trials
        self.status = initial_status(device)

    def feed(self, event: dict[str, Any]) -> Progress | None:
        if event["side"] == "candidate" and event.get("event") == "ready":
            self.status = "running"
        step = describe(event, self.trials)
        return Progress(self.status, step) if step else None


class LatestSender:
    """Sends progress from its own thread, newest first: a slow portal never stalls the
    evaluator's output pipe, and steps that arrive while a post is in flight are coalesced."""

    def __init__(self, send: Callable[[Progress], None]) -> None:
        self._send = send
        self._latest: Progress | None = None
        self._sent: Progress | None = None
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def put(self, progress: Progress) -> None:
        with self._wake:
            self._latest = progress
            self._wake.notify()

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is pending, then stop (the report follows right after)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=timeout_s)

    def _loop(self) -> None:
        while True:
            with self._wake:
                while self._latest == self._sent and not self._closed:
                    self._wake.wait()
                if self._latest == self._sent:
                    return
                progress = self._latest
            if progress is not None:
                self._send(progress)
            self._sent = progress
