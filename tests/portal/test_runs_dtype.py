"""A run's precision reaches the evaluation: each sample's job carries it as `--dtype` where the
problem takes it; where it does not, the sample runs in the problem's dtype and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contract.job import EvalJob
from portal.runs.models import RunSample
from portal.submissions.services import task_payload

from .conftest import VALID_SOURCE
from .runs_helpers import load_problems, pack

pytestmark = pytest.mark.django_db
FLOAT32_ONLY = "sharded-grad-clip"  # not mapped from ParallelKernelBench; float32 alone


def _samples(api: Any, hardware: Any, precision: str) -> dict[str, RunSample]:
    from django.core.files.uploadedfile import SimpleUploadedFile

    run = api.post("/api/v1/runs/", {"model": "m", "hardware": hardware.slug, "k": 1,
                                     "precision": precision}, format="json").json()
    files = {"all-reduce/0.py": VALID_SOURCE.encode(), f"{FLOAT32_ONLY}/0.py": VALID_SOURCE.encode()}
    r = api.post(f"/api/v1/runs/{run['id']}/samples/",
                 {"archive": SimpleUploadedFile("s.zip", pack(files))}, format="multipart")
    assert r.json()["accepted"] == 2, r.json()
    return {s.problem.slug: s for s in RunSample.objects.filter(run_id=run["id"]).select_related("submission")}


def _job_dtype(sample: RunSample) -> list[str]:
    job = EvalJob.from_payload(task_payload(sample.submission, "t"))
    command = job.command(["pkb"], Path("s.py"), 3, 600)
    return command[command.index("--dtype") + 1:command.index("--dtype") + 2] if "--dtype" in command else []


@pytest.mark.parametrize("precision,dtype", [("bf16", "bfloat16"), ("fp32", "float32")])
def test_the_runs_precision_is_the_evaluations_dtype(owner_api: Any, cpu_hardware: Any, all_reduce: Any,
                                                    no_dispatch: list[int], precision: str, dtype: str) -> None:
    load_problems([FLOAT32_ONLY])
    samples = _samples(owner_api, cpu_hardware, precision)
    assert samples["all-reduce"].submission.dtype == dtype and _job_dtype(samples["all-reduce"]) == [dtype]
    assert not samples["all-reduce"].message


def test_a_problem_without_the_runs_precision_runs_in_its_own_and_says_so(
        owner_api: Any, cpu_hardware: Any, all_reduce: Any, no_dispatch: list[int]) -> None:
    load_problems([FLOAT32_ONLY])
    sample = _samples(owner_api, cpu_hardware, "bf16")[FLOAT32_ONLY]
    assert sample.submission.dtype == "" and _job_dtype(sample) == []
    assert sample.message == f"evaluated in float32: {FLOAT32_ONLY} takes no bfloat16 (float32)"
