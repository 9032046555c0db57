"""Where an evaluation's wall time went: named phases, each from the end of the one before."""

from __future__ import annotations

import time


class PhaseClock:
    def __init__(self) -> None:
        self.began = time.monotonic()
        self.marks: list[tuple[str, float]] = []

    def mark(self, phase: str) -> None:
        """``phase`` ended now (it began where the last one ended, or at the clock's start)."""
        self.marks.append((phase, time.monotonic()))

    def seconds(self) -> dict[str, float]:
        out, last = {}, self.began
        for phase, at in self.marks:
            out[phase] = round(out.get(phase, 0.0) + at - last, 3)
            last = at
        return out
