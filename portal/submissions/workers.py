"""Which hardware queues a live worker consumes, asked of the workers themselves.

Celery's remote control (``inspect().active_queues()``) is broadcast over the broker; every
running worker answers with the queues it consumes. The answer is cached for
``PKB_WORKER_LIVENESS_TTL_S`` so that pages and uploads do not each wait for the broadcast. A
broker that cannot be asked gives ``None`` (unknown), which callers must not read as "no worker".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)

CACHE_KEY = "pkb:live-queues"
_UNKNOWN = "unknown"  # cached briefly too: a broker that is down must not slow every request


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
    cached = cache.get(CACHE_KEY)
    if cached == _UNKNOWN:
        return Liveness(False, {})
    if isinstance(cached, dict):
        return Liveness(True, cached)
    workers = _ask_workers()
    if workers is None:
        cache.set(CACHE_KEY, _UNKNOWN, min(5, settings.PKB_WORKER_LIVENESS_TTL_S))
        return Liveness(False, {})
    cache.set(CACHE_KEY, workers, settings.PKB_WORKER_LIVENESS_TTL_S)
    return Liveness(True, workers)


def forget() -> None:
    """Drop the cached answer (after starting a worker, in tests and in ``pkb_up``)."""
    cache.delete(CACHE_KEY)


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
