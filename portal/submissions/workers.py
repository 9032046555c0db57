"""Which hardware queues a live worker consumes, asked of the workers themselves.

Celery's remote control (``inspect().active_queues()``) is broadcast over the broker; every
running worker answers with the queues it consumes. The answer is cached for
``PKB_WORKER_LIVENESS_TTL_S`` so that pages and uploads do not each wait for the broadcast. A
broker that cannot be asked gives ``None`` (unknown), which callers must not read as "no worker".
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)

CACHE_KEY = "pkb:live-queues"
REFRESHING_KEY = "pkb:live-queues:refreshing"
STALE_TTLS = 4  # an answer this many TTLs old is still served (while a new one is asked for)


@dataclass(frozen=True)
class Liveness:
    """Workers per queue, or ``known=False`` when the broker did not answer."""

    known: bool
    workers: dict[str, int]

    def serves(self, queue: str) -> bool | None:
        return self.workers.get(queue, 0) > 0 if self.known else None

    def count(self, queue: str) -> int | None:
        return self.workers.get(queue, 0) if self.known else None


def liveness() -> Liveness:
    """The workers' last answer. Younger than ``PKB_WORKER_LIVENESS_TTL_S``: as it is. Older, up
    to ``STALE_TTLS`` times that: as it is too, while one thread asks again beside the request,
    so that no page waits for the broadcast (one request in each TTL waited 1 to 2 s for it, on
    /hardware/, a hardware page, the upload form and ``GET /api/v1/hardware/``). Nothing at hand,
    or older still: asked now. An upload's refusal reads the same answer: one that is a TTL or
    more out of date is replaced by the time a refused client retries (``Retry-After``)."""
    entry = cache.get(CACHE_KEY)
    ttl = settings.PKB_WORKER_LIVENESS_TTL_S
    if isinstance(entry, dict) and "at" in entry:
        age = time.time() - entry["at"]
        if age < ttl or (age < ttl * STALE_TTLS and _refresh_beside()):
            return _as_liveness(entry["workers"])
    return _as_liveness(_ask_and_keep())


def _as_liveness(workers: dict[str, int] | None) -> Liveness:
    return Liveness(False, {}) if workers is None else Liveness(True, workers)


def _ask_and_keep() -> dict[str, int] | None:
    workers = _ask_workers()
    ttl = settings.PKB_WORKER_LIVENESS_TTL_S
    # an unknown answer (broker down) is kept briefly too: it must not slow every request
    at = time.time() if workers is not None else time.time() - ttl + min(5, ttl)
    cache.set(CACHE_KEY, {"at": at, "workers": workers}, max(1, ttl * STALE_TTLS))
    return workers


def _refresh_beside() -> bool:
    """Start one thread (per cache) that asks the workers again; True: the stale answer may be
    served meanwhile."""
    if cache.add(REFRESHING_KEY, 1, max(5, int(settings.PKB_WORKER_INSPECT_TIMEOUT_S * 5))):
        def refresh() -> None:
            try:
                _ask_and_keep()
            finally:
                cache.delete(REFRESHING_KEY)

        threading.Thread(target=refresh, name="pkb-liveness", daemon=True).start()
    return True


def forget() -> None:
    """Drop the cached answer (after starting a worker, in tests and in ``pkb_up``)."""
    cache.delete_many([CACHE_KEY, REFRESHING_KEY])


def _ask_workers() -> dict[str, int] | None:
    from portal.celery import app

    try:
        with app.connection_for_write() as conn:
            # one attempt: a broker that is down must not hold a page or an upload for seconds
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2, timeout=1)
            replies = app.control.inspect(timeout=settings.PKB_WORKER_INSPECT_TIMEOUT_S,
                                          connection=conn).active_queues()
    except Exception as exc:  # broker unreachable: unknown, not "no worker"
        log.warning("could not ask the workers for their queues: %s: %s", type(exc).__name__, exc)
        return None
    counts: dict[str, int] = {}
    for queues in (replies or {}).values():
        for queue in queues or []:
            name = queue.get("name") if isinstance(queue, dict) else None
            if name:
                counts[name] = counts.get(name, 0) + 1
    return counts
