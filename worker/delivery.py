"""Getting a result to the portal even while it is down: kept on disk, re-posted with backoff.

A finished evaluation is hours of GPU time at worst and cannot be recomputed cheaply, so the
report is written to the spool before the first attempt and removed only when the portal has
answered for it: accepted, already recorded (409: a repeat, the portal stores one), or refused
for good (another 4xx). A worker that dies or gives up leaves the file; the next worker start
posts it again. The portal's secret check makes a repeat harmless.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import callback
from .config import WorkerConfig

log = logging.getLogger(__name__)


class Spool:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def save(self, submission_id: int, url: str, token: str, payload: dict[str, Any]) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=f".{submission_id}-", dir=self.directory)
        with os.fdopen(fd, "w") as out:  # mkstemp: mode 0600, the token stays the worker's
            json.dump({"url": url, "token": token, "payload": payload}, out)
        final = self.directory / f"{submission_id}-{time.time_ns()}.json"
        os.replace(tmp, final)  # whole or absent: a crash mid-write leaves only a dot-file
        return final

    def pending(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob("*.json"))


# A portal that answers 500 to a result is up and failing on this very body (a candidate's text
# it could not store was one): retried for PKB_WORKER_DELIVERY_MAX_S (6 h), the job held the
# worker until its task's hard limit. After this many such answers the result waits in the spool
# (a restarted worker posts it again) and the worker takes its next job.
SERVER_ERROR_TRIES = 5


def deliver_once_accepted(url: str, token: str, payload: dict[str, Any], config: WorkerConfig,
                          path: Path | None = None) -> str:
    """Posts until the portal answers; returns accepted, duplicate, rejected or kept."""
    deadline = time.monotonic() + config.delivery_max_s
    delay = 1.0
    server_errors = 0
    while True:
        try:
            callback.post(url, token, payload, retries=0)
            outcome = "accepted"
        except callback.CallbackRejected as exc:
            outcome = "duplicate" if exc.already_recorded else "rejected"
            if outcome == "rejected":
                log.warning("portal refused a result for good: %s", exc)
        except ConnectionError as exc:
            server_errors = server_errors + 1 if isinstance(exc, callback.ServerError) else 0
            if server_errors >= SERVER_ERROR_TRIES:
                log.error("portal failed on this result %d times in a row; kept in %s for the next "
                          "start: %s", server_errors, path, exc)
                return "kept"
            if time.monotonic() + delay > deadline:
                log.error("portal unreachable for %s s; result kept in %s: %s",
                          config.delivery_max_s, path, exc)
                return "kept"
            log.warning("portal unreachable, retrying in %.0f s: %s", delay, exc)
            time.sleep(delay)
            delay = min(delay * 2, config.retry_max_s)
            continue
        if path is not None:
            path.unlink(missing_ok=True)
        return outcome


def deliver(submission_id: int, url: str, token: str, payload: dict[str, Any],
            config: WorkerConfig) -> str:
    path = Spool(config.spool_dir).save(submission_id, url, token, payload)
    return deliver_once_accepted(url, token, payload, config, path)


def flush_spool(config: WorkerConfig) -> int:
    """Posts every result a previous run of this worker left behind; returns how many."""
    done = 0
    for path in Spool(config.spool_dir).pending():
        try:
            kept = json.loads(path.read_text())
        except (OSError, ValueError):
            log.error("unreadable spooled result %s left in place", path)
            continue
        if deliver_once_accepted(kept["url"], kept["token"], kept["payload"], config, path) != "kept":
            done += 1
    return done


def flush_in_background(config: WorkerConfig) -> threading.Thread:
    thread = threading.Thread(target=flush_spool, args=(config,), daemon=True, name="pkb-spool")
    thread.start()
    return thread
