"""Creating runs and giving them files: every file validated first, then everything stored in
one transaction (accepted files as submissions, refused ones with their reason), so a request
never leaves a run half-filled."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterable, Mapping

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone

from portal.catalog.models import Hardware, Problem
from portal.submissions import services as submissions
from portal.submissions.models import BACKENDS
from portal.submissions.validation import (SubmissionError, check_model_name, check_provider, check_python,
                                            decode_source)

from .models import PRECISIONS, Run, RunSample

MAX_NOTE = 10_000
MAX_SAMPLING = 4_000  # characters of its JSON
# A run's precision as the evaluator's --dtype (no problem takes fp8).
PRECISION_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8"}


@dataclass
class FilePlan:
    """One file on its way into a run: where it goes, or why it cannot."""

    name: str
    problem: str | None
    source: bytes | None
    code: str = ""  # set: refused, with ``message``
    message: str = ""  # why refused; on an accepted file, a note (e.g. it relies on multicast)
    pkb_id: int | None = None
    adapter: str = ""
    turn: int | None = None
    context: str = ""

    def refuse(self, code: str, message: str) -> FilePlan:
        self.code, self.message = code, message
        return self


def create_run(*, user: Any, data: Mapping[str, Any], imported_from: str = "") -> Run:
    """``data``: model, provider, sampling, backend, precision, hardware, k, note, link."""
    name = check_model_name(str(data.get("model", "")))
    hardware = Hardware.objects.active().filter(slug=data.get("hardware") or "").first()
    if hardware is None:
        raise SubmissionError("unknown_hardware", f"No hardware {data.get('hardware')!r}; "
                              "GET /api/v1/hardware/ lists them.", field="hardware")
    # As a single upload is: samples that no worker would take would wait unseen until the
    # reaper failed them, and an agent would wait a whole turn for each.
    submissions.check_live_worker(hardware)
    backend = data.get("backend") or "cuda"
    if backend not in {b for b, _ in BACKENDS if b != "reference"}:
        raise SubmissionError("unknown_backend", f"Unknown backend {backend!r}: torch, triton or "
                              "cuda.", field="backend")
    precision = data.get("precision") or "bf16"
    if precision not in {p for p, _ in PRECISIONS}:
        raise SubmissionError("unknown_precision", f"Unknown precision {precision!r}: "
                              f"{', '.join(p for p, _ in PRECISIONS)}.", field="precision")
    k = _positive_int(data.get("k"), "k", settings.PKB_RUN_MAX_K)
    sampling = data.get("sampling") or {}
    if not isinstance(sampling, dict):
        raise SubmissionError("bad_sampling", "sampling: a JSON object of the sampling settings, "
                              'e.g. {"temperature": 1.0, "top_p": 0.95}.', field="sampling")
    # Every run's settings go out with GET runs/ (500 runs at a time): unbounded, 2.4 MB a run
    # made that one answer 1.2 GB. A few settings fit; a long text belongs in the note.
    if len(json.dumps(sampling)) > MAX_SAMPLING:
        raise SubmissionError("bad_sampling", f"sampling: at most {MAX_SAMPLING} characters of JSON; "
                              "put longer text (a system prompt) in the note or the link.", field="sampling")
    note, link = str(data.get("note") or ""), str(data.get("link") or "")
    if len(note) > MAX_NOTE:
        raise SubmissionError("note_too_long", f"note: at most {MAX_NOTE} characters.", field="note")
    if link and not link.startswith(("https://", "http://")):
        raise SubmissionError("bad_link", "link: an http(s) URL.", field="link")
    # Checked as an upload's is: it becomes the model's provider, which boards show and export.
    provider = check_provider(str(data.get("provider") or ""))
    return Run.objects.create(owner=user, model=submissions.get_model(name, provider),
                              provider=provider, sampling=sampling, backend=backend,
                              precision=precision, hardware=hardware, k=k, note=note,
                              link=link[:500], imported_from=imported_from[:300])


def _positive_int(value: Any, field: str, top: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SubmissionError(f"bad_{field}", f"{field}: a whole number from 1 to {top}.",
                              field=field) from None
    if not 1 <= number <= top:
        raise SubmissionError(f"bad_{field}", f"{field}: a whole number from 1 to {top}.", field=field)
    return number


def add_files(run: Run, plans: Iterable[FilePlan], *, user: Any) -> list[RunSample]:
    """Check each file, then store all of them at once. Returns one row per file, in order."""
    plans = list(plans)
    if run.owner_id != user.pk and not user.is_staff:
        raise SubmissionError("not_owner", "Only the run's owner adds samples to it.", status=403)
    submissions.check_live_worker(run.hardware)
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()  # one writer per run at a time
        counts = _accepted_counts(run)
        total = sum(counts.values())
        daily_left = _daily_left(user)
        checked = []
        for plan in plans:
            target = None if plan.code else _check(plan, run)
            if target is not None:
                key = problem_key(target.version.problem.slug, plan.pkb_id)
                if counts[key] >= run.k:
                    plan.refuse("too_many_samples", f"{problem_label(key)} already has the run's "
                                f"k = {run.k} samples; create a run with a larger k for more.")
                    target = None
                elif total >= settings.PKB_RUN_MAX_SAMPLES:
                    plan.refuse("run_full", f"the run holds {total} samples, the most a run may.")
                    target = None
                elif daily_left <= 0:
                    plan.refuse("daily_cap", f"{settings.PKB_RUN_DAILY_SAMPLE_CAP} run samples "
                                "in 24 hours is the most one user may add; try again later.")
                    target = None
                else:
                    counts[key] += 1
                    total += 1
                    daily_left -= 1
            checked.append((plan, target))
        return [_store(run, plan, target, user) for plan, target in checked]


def _daily_left(user: Any) -> int:
    if user.is_staff:
        return 1 << 30
    since = timezone.now() - timedelta(days=1)
    used = RunSample.objects.filter(run__owner=user, status=RunSample.ACCEPTED,
                                    created_at__gte=since).count()
    return settings.PKB_RUN_DAILY_SAMPLE_CAP - used


def problem_key(slug: str, pkb_id: int | None) -> str:
    """The problem a sample answers within its run: ours, or for a ParallelKernelBench file the
    PKB problem as well, since two of PKB's can map to one of ours (PKB 2 and 34 both to
    all-gather) and are two problems of the run, not two samples of one (k and pass@k)."""
    return slug if pkb_id is None else f"{slug}@pkb{pkb_id}"


def problem_label(key: str) -> str:
    slug, _, pkb_id = key.partition("@pkb")
    return f"{slug} (PKB {pkb_id})" if pkb_id else slug


def _accepted_counts(run: Run) -> Counter[str]:
    rows = (run.samples.filter(status=RunSample.ACCEPTED).values("problem__slug", "pkb_id")
            .annotate(n=Count("pk")))
    return Counter({problem_key(r["problem__slug"], r["pkb_id"]): r["n"] for r in rows})


def _check(plan: FilePlan, run: Run) -> submissions.Target | None:
    try:
        if not plan.problem:
            raise SubmissionError("unknown_problem", "No problem named for this file: put it "
                                  "under a directory named after the problem, or name it "
                                  "<problem>.py or <problem>__<n>.py.", field="problem")
        text = decode_source(plan.source or b"", settings.PKB_MAX_SOURCE_BYTES)
        check_python(text)
        return submissions.resolve_target(plan.problem, run.hardware.slug)
    except SubmissionError as exc:
        plan.refuse(exc.code, exc.message)
        return None


def _store(run: Run, plan: FilePlan, target: submissions.Target | None, user: Any) -> RunSample:
    problem = target.version.problem if target else (
        Problem.objects.filter(slug=plan.problem).first() if plan.problem else None)
    common = dict(run=run, problem=problem, name=plan.name[:300], pkb_id=plan.pkb_id,
                  adapter=plan.adapter, turn=plan.turn, context=plan.context)
    if target is None:
        return RunSample.objects.create(status=RunSample.REJECTED, code=plan.code,
                                        message=plan.message, **common)
    text = decode_source(plan.source or b"", settings.PKB_MAX_SOURCE_BYTES)
    dtype, note = evaluation_dtype(run.precision, target.version)
    sub = submissions.create(user=user, target=target, backend=run.backend, model=run.model,
                             text=text, origin="api", dtype=dtype)
    index = (run.samples.filter(problem=problem, status=RunSample.ACCEPTED)
             .aggregate(n=Max("index"))["n"])
    message = "; ".join(m for m in (plan.message, note) if m)
    return RunSample.objects.create(status=RunSample.ACCEPTED, submission=sub, message=message,
                                    index=0 if index is None else index + 1, **common)


def evaluation_dtype(precision: str, version: Any) -> tuple[str, str]:
    """The dtype a run's sample is evaluated in (its precision, where the problem takes it) and,
    where the problem does not, a note saying in which dtype it is evaluated instead."""
    wanted = PRECISION_DTYPES.get(precision, precision)
    takes = list((version.details or {}).get("dtypes") or [])
    if wanted in takes:
        return wanted, ""
    return "", (f"evaluated in {takes[0] if takes else 'its default dtype'}: "
                f"{version.problem.slug} takes no {wanted} ({', '.join(takes) or 'dtypes unknown'})")


def sample_json(sample: RunSample) -> dict[str, Any]:
    """What a client is told about one file it gave a run."""
    return {"name": sample.name, "status": sample.status,
            "problem": sample.problem.slug if sample.problem else None,
            "index": sample.index, "submission": sample.submission_id,
            "code": sample.code or None, "message": sample.message or None,
            "pkb_id": sample.pkb_id, "adapter": sample.adapter or None, "turn": sample.turn}
