"""Suite-wide switches. ``pytest --sandbox=off`` runs every evaluation unconfined: the judge must be
sound where a host cannot confine (``make test`` runs the evaluator's tests both ways). Tests that
are about the confinement itself carry the ``confined`` marker and are skipped then. Tests marked
``unconfined_in_long`` run unconfined only in ``make test-long``: with the sandbox off they count
as ``long`` (docs/tests.md says which and why)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterator

import pytest


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--sandbox", choices=("on", "off"), default="on",
                     help="run evaluations confined (on, the default) or unconfined (off)")


def pytest_configure(config: Any) -> None:
    # Here rather than in pyproject.toml's list: a change there would rebuild every .venv (Makefile).
    config.addinivalue_line("markers", "unconfined_in_long: with --sandbox=off it counts as long (make "
                            "test-long): its outcome does not hang on how ranks start, die or hand back outputs")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        one_thread_per_worker()


def one_thread_per_worker() -> None:
    """Under pytest -n each worker's own torch work (the judge outside the ranks, the exact and
    decision-band suites in process, the portal's reports) uses one thread: make test's two workers
    on the 2-core machine, each with torch's default of a thread per core, ran four busy threads
    beside the ranks (docs/tests.md, "One thread per worker"). Ranks set their own (the sandbox's
    OMP_NUM_THREADS, the job's threads); what this process starts inherits it."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.hookimpl(tryfirst=True)  # before -m selects: the `long` added here must count
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if config.getoption("--sandbox") == "off":
        skip = pytest.mark.skip(reason="about the sandbox itself; this run has it off (--sandbox=off)")
        for item in items:
            if "confined" in item.keywords:
                item.add_marker(skip)
            if item.get_closest_marker("unconfined_in_long") is not None:
                item.add_marker(pytest.mark.long)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=start_order)


def start_order(item: Any) -> tuple[int, bool]:
    """Where ``item`` goes under pytest -n (make test); every worker sorts the same way, as
    pytest-xdist requires.

    xdist hands tests out in collection order: a long evaluation left near the end keeps one
    worker busy while the other has nothing to do, so the ``slow`` tests without a database go
    first. Database tests then keep pytest-django's order (plain, then transactional: the live
    server and the real Celery worker come after every plain one, as in a serial run), slow
    ones first; the quick tests without a database fill in at the end."""
    slow = item.get_closest_marker("slow") is not None
    database = _database_use(item)
    if database is None:
        return (0 if slow else 3, False)
    return (1 if database == "db" else 2, not slow)


def _database_use(item: Any) -> str | None:
    """How ``item`` uses the database, as pytest-django reads its marker and fixtures: "db",
    "transactional" or None."""
    fixtures = getattr(item, "fixturenames", ())
    marker = item.get_closest_marker("django_db")
    flags = marker.kwargs if marker is not None else {}
    if flags.get("transaction") or flags.get("reset_sequences") or \
            "transactional_db" in fixtures or "live_server" in fixtures:
        return "transactional"
    return "db" if marker is not None or "db" in fixtures else None


@pytest.fixture(autouse=True, scope="session")
def _sandbox_mode(request: Any) -> Iterator[None]:
    if request.config.getoption("--sandbox") == "on":
        yield
        return
    from evaluator import api, launcher, sandbox

    patch = pytest.MonkeyPatch()
    evaluation_init = api.Evaluation.__init__

    def unconfined(self: Any, config: Any, *args: Any, **kwargs: Any) -> None:
        evaluation_init(self, dataclasses.replace(config, sandbox=False), *args, **kwargs)

    patch.setattr(api.Evaluation, "__init__", unconfined)  # reports then say "sandbox": "off"
    patch.setattr(launcher, "open_box", lambda *a, confined, **k: sandbox.open_box(*a, confined=False, **k))
    yield
    patch.undo()


@pytest.fixture(scope="module")
def one_rank() -> Iterator[Any]:
    """A one-rank gloo group in this process, for running a reference directly (its collectives
    are then copies): the decision tests call references at sizes no launch needs."""
    import torch.distributed as dist

    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()
