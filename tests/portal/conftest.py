"""Personas and a small real catalog shared by the portal tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True)
def _fresh_throttles() -> None:
    cache.clear()


@pytest.fixture
def owner(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def other(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("other", password="other-pass-123")


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("staff", password="staff-pass-123", is_staff=True)


def client_for(user: Any | None) -> APIClient:
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def anonymous_api() -> APIClient:
    return APIClient()


@pytest.fixture
def owner_api(owner: Any) -> APIClient:
    return client_for(owner)


@pytest.fixture
def other_api(other: Any) -> APIClient:
    return client_for(other)


@pytest.fixture
def staff_api(staff: Any) -> APIClient:
    return client_for(staff)


@pytest.fixture
def cpu_hardware(db: None) -> Any:
    """A CPU profile whose queue is unique to this test process (Redis is shared)."""
    from portal.catalog.models import Hardware

    return Hardware.objects.create(slug=f"cpu-test-{os.getpid()}", name="Test CPU", kind="cpu",
                                   gpus=0, world_size=2, builtin=True, profile={"kind": "cpu"})


@pytest.fixture
def gpu_hardware(db: None) -> Any:
    from portal.catalog.models import Hardware

    profile = {"id": "h200-x4-test", "kind": "gpu", "gpus": {"model": "NVIDIA H200", "count": 4},
               "roofline": {"link_gbps": 400.0, "hbm_gbps": 4000.0,
                            "tflops": {"bfloat16": 900.0, "float32": 60.0}}}
    return Hardware.objects.create(slug="h200-x4-test", name="4x NVIDIA H200", kind="gpu", gpus=4,
                                   world_size=4, profile=profile)


@pytest.fixture
def all_reduce(db: None) -> Any:
    """The real all-reduce problem, loaded the way load_catalog loads every problem."""
    import problems
    from portal.catalog.services import LoadResult, upsert_problem

    p = problems.get("all-reduce")
    return upsert_problem(p, problems.source_text(p), problems.version(p), LoadResult())


@pytest.fixture
def real_report() -> dict[str, Any]:
    """A report the evaluator wrote (all-reduce, reference as solution, 2 gloo ranks)."""
    return json.loads((DATA / "report_all_reduce_pass.json").read_text())


ROUNDS_13 = [(0.251, 0.298), (0.250, 0.300), (0.253, 0.297), (0.249, 0.296), (0.252, 0.301),
             (0.250, 0.299)]


def with_interval(report: dict[str, Any], low: float = 1.17, high: float = 1.21,
                  moved: bool | None = None) -> dict[str, Any]:
    """``report`` as schema 1.3 writes it: an interval, per-round times, why timing stopped, clocks."""
    rounds = [{"candidate_ms": c, "reference_ms": r, "ratio": r / c} for c, r in ROUNDS_13]
    ratios = sorted(x["ratio"] for x in rounds)
    timing = {**report["timing"], "speedup": (ratios[2] + ratios[3]) / 2,
              "interval": {"low": low, "high": high, "level": 0.95,
                           "method": "bootstrap percentile interval of the median of per-round "
                                     "ratios, 2000 resamples"},
              "rounds": rounds,
              "stop": {"reason": "converged", "rounds": len(rounds), "seconds": 3.1,
                       "half_width": 0.008, "target_half_width": 0.01},
              "clocks": None if moved is None else {
                  "moved": moved, "note": "GPU 1 SM clock moved 1980 -> 1755 MHz",
                  "start": [{"gpu": 1, "sm_mhz": 1980.0, "mem_mhz": 3201.0, "temperature_c": 38.0,
                             "power_w": 120.0, "slowdown": False, "reasons": "0x0000000000000000"}],
                  "end": [{"gpu": 1, "sm_mhz": 1755.0, "mem_mhz": 3201.0, "temperature_c": 71.0,
                           "power_w": 690.0, "slowdown": True, "reasons": "0x0000000000000020"}]},
              "pinning": None}
    return {**report, "schema_version": "1.3", "timing": timing}


def one_round(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` as schema 1.3 writes it when the time cap stops slow rounds after the first
    (CPU): its "interval" is that round's ratio at both ends."""
    c, r = ROUNDS_13[0]
    ratio = r / c
    timed = with_interval(report, low=ratio, high=ratio)
    timed["timing"] = {**timed["timing"], "speedup": ratio,
                       "rounds": [{"candidate_ms": c, "reference_ms": r, "ratio": ratio}],
                       "stop": {"reason": "time_cap", "rounds": 1, "seconds": 6.3, "half_width": 0.0,
                                "target_half_width": 0.01}}
    return timed


@pytest.fixture
def interval_report(real_report: dict[str, Any]) -> dict[str, Any]:
    """The real report in the shape of schema 1.3 (interval, rounds, stop; clocks not read)."""
    return with_interval(real_report)


def a_result(user: Any, model: str, hardware: Any, problem: Any, *, speedup: float | None,
             correct: bool = True, minutes_ago: float = 0.0) -> Any:
    """A finished submission at ``hardware``'s ranked setting of ``problem``, with only the
    numbers the boards read (no report), finished ``minutes_ago``."""
    from datetime import timedelta

    from django.utils import timezone

    from portal.submissions.models import AIModel, Submission

    when = timezone.now() - timedelta(minutes=minutes_ago)
    return Submission.objects.create(
        user=user, model=AIModel.objects.get_or_create(name=model, defaults={"provider": "lab"})[0],
        attempt=1, problem_version=problem.current_version(), hardware=hardware, backend="torch",
        world_size=hardware.ranked_world_size(problem.world_sizes), size=hardware.size,
        source="x", source_sha256="0" * 64, status="finished", created_at=when, started_at=when,
        finished_at=when, verdict="pass" if correct else "fail",
        failure_class="" if correct else "value_mismatch", speedup=speedup if correct else None)


def lucky_and_steady(user: Any, problem: Any, hardware: Any) -> None:
    """Two models on one problem. ``lucky`` failed, then scored 3.81x (a CPU host's luck:
    pass@1 1/2); ``steady`` was right both times, at 0.39x first and 2.0x later (pass@1 1).
    By speed lucky leads; by correctness steady does, with its first correct result 0.39x."""
    a_result(user, "lucky", hardware, problem, speedup=None, correct=False, minutes_ago=40)
    a_result(user, "steady", hardware, problem, speedup=0.39, minutes_ago=20)
    a_result(user, "lucky", hardware, problem, speedup=3.81, minutes_ago=10)
    a_result(user, "steady", hardware, problem, speedup=2.0, minutes_ago=5)


@pytest.fixture
def job(owner: Any, all_reduce: Any, cpu_hardware: Any) -> tuple[Any, str]:
    """A queued submission and the worker token its task message would carry."""
    from portal.submissions.services import create, get_model, resolve_target

    sub = create(user=owner, target=resolve_target("all-reduce", cpu_hardware.slug),
                 backend="torch", model=get_model("human"), text=VALID_SOURCE, origin="upload")
    token = sub.new_token()
    sub.save()
    return sub, token


@pytest.fixture
def no_dispatch(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record dispatches instead of sending them (tests of the portal alone)."""
    sent: list[int] = []
    monkeypatch.setattr("portal.submissions.services.dispatch",
                        lambda pk, token: sent.append(pk))
    return sent


VALID_SOURCE = (
    "import torch.distributed as dist\n\n\n"
    "def solution(x, *, group):\n"
    "    out = x.clone()\n"
    "    dist.all_reduce(out, group=group)\n"
    "    return out\n"
)


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """Under pytest -n --dist loadgroup (make test), the tests that need the real Celery worker
    share one pytest worker: it and the live server it reports to start once, not once each."""
    for item in items:
        if "celery_worker_process" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("celery-worker"))


@pytest.fixture(scope="session")
def celery_worker_process(live_server: Any) -> Any:
    """A real `celery -A worker worker` subprocess on Redis, evaluating on CPU over gloo.

    It knows nothing of the database: it reports to the live server over HTTP.
    """
    import subprocess
    import sys
    import time

    from django.conf import settings

    queue = f"pkb.hw.cpu-test-{os.getpid()}"
    env = {**os.environ, "PKB_BROKER_URL": settings.CELERY_BROKER_URL,
           "PKB_PORTAL_URL": live_server.url, "PKB_WORKER_NAME": "test-worker",
           "PKB_WORKER_RETRY_MAX_S": "2", "PKB_WORKER_DELIVERY_MAX_S": "30",
           "PKB_WORKER_SPOOL_DIR": f"/tmp/pkb-test-spool-{os.getpid()}"}
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the worker must not need Django
    log = open(Path(settings.BASE_DIR) / "var" / f"test-worker-{os.getpid()}.log", "wb") \
        if (Path(settings.BASE_DIR) / "var").is_dir() else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker", "worker", "-Q", queue, "--concurrency", "1",
         "--prefetch-multiplier", "1", "-n", f"test-{os.getpid()}@%h", "--loglevel", "INFO",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(1)
    yield proc
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(predicate: Any, timeout_s: float = 120.0, every_s: float = 0.5, what: str = "") -> Any:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"{what or 'not true'}: not within {timeout_s} s")
