"""The status channel from a rank process to the evaluating parent.

Ranks write one JSON object per line to an inherited pipe; the parent never unpickles anything a
rank sends (candidate code runs in the rank and could forge a pickle), and reads tensors only with
``torch.load(weights_only=True)`` from files whose hashes it took when the side finished.

Every message carries a per-side token that the rank reads from its stdin before any candidate
code is imported, so stray or forged writes to the pipe prove nothing: the in-rank GPU judge
ignores them, and a judged side (the judge outside the ranks) is failed for them, since only the
harness writes there (launcher.SideRun._stray_line). Code in the same process could still dig the
token out of memory: nothing a rank says decides a verdict or a time (docs/judge.md).
"""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

def new_token() -> str:
    return secrets.token_hex(16)

READY = "ready"
STEP = "step"
TIMES = "times"
# A judged block's call is done and its outputs are in their slot: the judge may copy them and
# only then releases the next call's inputs (evaluator/judge/driver.py).
CALLED = "called"
WAITING = "waiting"  # the rank waits for the parent's timing commands
ERROR = "error"
DONE = "done"
BUILD = "build"  # the rank starts compiling (evaluator/builds.py): held to the build limit meanwhile
BUILT = "built"


class RankChannel:
    """The rank's end: write-only, line-buffered JSON."""

    def __init__(self, fd: int, rank: int, token: str) -> None:
        self._fd = fd
        self._rank = rank
        self._token = token

    def send(self, event: str, **payload: Any) -> None:
        line = json.dumps({"event": event, "rank": self._rank, "token": self._token, **payload}) + "\n"
        data = line.encode()
        while data:
            written = os.write(self._fd, data)
            data = data[written:]


def parse_lines(buffer: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """Split complete lines off ``buffer``; malformed lines become ``{"event": "garbage"}``."""
    *lines, rest = buffer.split(b"\n")
    events = []
    for raw in lines:
        if not raw.strip():
            continue
        try:
            event = json.loads(raw)
            if not isinstance(event, dict) or "event" not in event:
                raise ValueError
        except (ValueError, RecursionError):
            # A rank writes what it likes: deep nesting ("[" * 100000) makes the decoder recurse
            # past the limit, which is no ValueError, and used to end the evaluation with no verdict.
            event = {"event": "garbage", "raw": raw[:200].decode(errors="replace")}
        events.append(event)
    return events, rest
