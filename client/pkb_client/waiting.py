"""Following a submission until its evaluation ends, with a live status line."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

from .http import Api
from .reports import PENDING, status_line


class WaitTimeout(Exception):
    pass


def wait_for_submission(api: Api, sub_id: int, *, timeout_s: float, every_s: float = 2.0,
                        show: Callable[[str], None] | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        sub = api.get(f"submissions/{sub_id}/")
        line = status_line(sub)
        if show and line != last:
            show(line)
            last = line
        if sub["status"] not in PENDING:
            return sub
        if time.monotonic() > deadline:
            raise WaitTimeout(f"submission #{sub_id} still {sub['status']} after {timeout_s:.0f} s")
        time.sleep(every_s)


def terminal_line(text: str) -> None:
    """One updating line on a terminal; plain lines when stderr is a file or pipe."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + text)
        if not any(word in text for word in PENDING):
            sys.stderr.write("\n")
    else:
        sys.stderr.write(text + "\n")
    sys.stderr.flush()
