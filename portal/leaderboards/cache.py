"""Leaderboards served from the cache, recomputed when a result lands.

Every board is a pure function of the finished submissions, the problem versions, the hardware
and the reference timings. One generation number (in the shared cache, so every gunicorn
process sees it) is bumped whenever any of those change (signals below, and ``invalidate()``
after bulk writes that send none); an entry computed under an older generation is recomputed
on its next read. While one process recomputes, the others keep serving the previous entry
rather than all recomputing at once: a board may lag a landed result by one computation
(about a second with 100,000 submissions), never more. ``PKB_BOARD_CACHE_S`` bounds an entry's
life (0 turns the cache off).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save

GENERATION = "pkb:boards:generation"
# The shape of what an entry holds: bumped when it changes, so that a deploy never reads an
# entry pickled by the code before it (2: scores with intervals over problems, 2026-11-29).
SHAPE = 2
T = TypeVar("T")


def generation() -> int:
    value = cache.get(GENERATION)
    if value is None:
        cache.add(GENERATION, 1, timeout=None)
        value = cache.get(GENERATION, 1)
    return int(value)


def invalidate() -> None:
    try:
        cache.incr(GENERATION)
    except ValueError:  # not there yet (evicted or a fresh cache): any new value invalidates
        cache.set(GENERATION, int(time.time()), timeout=None)


def _key(name: str, parts: tuple[Any, ...]) -> str:
    return f"pkb:board:{SHAPE}:{name}:{hashlib.sha256(repr(parts).encode()).hexdigest()[:32]}"


def cached(name: str, parts: tuple[Any, ...], compute: Callable[[], T]) -> T:
    ttl = settings.PKB_BOARD_CACHE_S
    if ttl <= 0:
        return compute()
    key, gen = _key(name, parts), generation()
    entry = cache.get(key)
    if entry is not None and entry[0] == gen:
        return entry[1]
    if cache.add(f"{key}:lock", 1, timeout=60):  # this process recomputes
        try:
            value = compute()
            cache.set(key, (gen, value), timeout=ttl)
        finally:
            cache.delete(f"{key}:lock")
        return value
    if entry is not None:
        return entry[1]  # another process is recomputing: the previous board meanwhile
    deadline = time.monotonic() + 30  # a first computation under load can take seconds
    while time.monotonic() < deadline:  # the very first computation: wait for its result
        time.sleep(0.05)
        if (entry := cache.get(key)) is not None:
            return entry[1]
    return compute()


def scored_track(hardware: Any) -> Any:
    """Every model scored on ``hardware``, computed once per generation for all boards."""
    from .services import scored_track as compute

    return cached("scored-track", (hardware.pk,), lambda: compute(hardware))


def default_hardware() -> Any:
    """services.default_hardware (a count over every submission), from the cache."""
    from portal.catalog.models import Hardware

    from .services import default_hardware as compute

    pk = cached("default-hardware", (), lambda: getattr(compute(), "pk", None))
    return Hardware.objects.filter(pk=pk).first() if pk is not None else None


def _changed(sender: Any, instance: Any, **_: Any) -> None:
    if sender.__name__ == "Submission" and instance.status != "finished":
        return  # queued, running and failed jobs are on no board
    invalidate()


def connect() -> None:
    from portal.catalog.models import Hardware, Problem, ProblemVersion, ReferenceTiming
    from portal.submissions.models import AIModel, Submission

    for model in (Submission, AIModel, Problem, ProblemVersion, Hardware, ReferenceTiming):
        post_save.connect(_changed, sender=model, dispatch_uid=f"pkb-boards-{model.__name__}")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"pkb-boards-del-{model.__name__}")
