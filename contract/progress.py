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
