"""The evaluator's progress lines: ``PKB-PROGRESS {"side", "event", "step", "task"}`` on stderr,
one per step as rank 0 of a side reports it (``pkb eval --progress``)."""

from __future__ import annotations

import json
from typing import Any

PREFIX = "PKB-PROGRESS "
SIDES = ("candidate", "reference")


def format_line(side: str, event: dict[str, Any]) -> str:
    return PREFIX + json.dumps({"side": side, **event})


def parse_line(line: str) -> dict[str, Any] | None:
    """The event of one output line, or None when the line is not a progress line."""
    if not line.startswith(PREFIX):
        return None
    try:
        event = json.loads(line[len(PREFIX):])
    except ValueError:
        return None
    return event if isinstance(event, dict) and event.get("side") in SIDES else None


def quoted(text: str) -> str:
    """``text`` with no line a progress line: each that starts like one is indented. For output
    that quotes a candidate (`pkb eval`'s summary holds its exception), which the worker reads
    on the same pipe as the progress lines: a line of its own in an exception's text was a step
    to the worker (red team, 2026-11-28)."""
    return "\n".join("  " + line if line.startswith(PREFIX) else line for line in text.split("\n"))
