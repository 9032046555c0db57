from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.gzip import gzip_page

from portal.lib import sweeps as sweep_reports

from . import presenters, sweeps
from .forms import UploadForm
from .models import Submission
from .services import preferred_hardware, submit
from .validation import SubmissionError


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    form = UploadForm(request.POST or None, request.FILES or None,
                      initial={"problem": request.GET.get("problem"),
                               "hardware": request.GET.get("hardware") or _default_hardware()})
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            sub = submit(user=request.user, problem=data["problem"], hardware=data["hardware"],
                         backend=data["backend"], model=data["model"], provider=data["provider"],
                         source=data["source"].read(), origin="upload", sweep=data["sweep"],
                         file_name=data["source"].name)
        except SubmissionError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            status = exc.status
        else:
            return redirect(sub)
    elif request.method == "POST":
        status = 400
    return render(request, "submissions/upload.html", {"form": form}, status=status)


def _default_hardware() -> str | None:
    hw = preferred_hardware()  # one a live worker serves, where there is one
    return hw.slug if hw else None


def _load(pk: int) -> Submission:
    # Read-only: a job past its deadline is said to be overdue here and failed by the reaper.
    return get_object_or_404(Submission.objects.select_related(
        "model", "hardware", "user", "problem_version__problem"), pk=pk)


def detail(request: HttpRequest, pk: int) -> HttpResponse:
    sub = _load(pk)
    report = sub.report_for(request.user)  # what quotes a private source, only where it shows
    # The page renders what it shows and links the whole reports (report_json, sweep_json): printed
    # into it, a sweep near its 2,000,000-byte bound made 6.9 MB of HTML (docs/portal.md).
    return render(request, "submissions/detail.html", {
        "sub": sub, "report": report, "view": presenters.report_view(sub, report),
        "show_source": sub.visible_source_to(request.user),
        "status": presenters.status_payload(sub),
        "sweep": sweeps.submission_view(sub, sub.sweep_for(request.user)),
    })


def status(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(presenters.status_payload(_load(pk)))


@gzip_page  # a sweep's JSON repeats its keys size after size: it compresses many times over
def report_json(request: HttpRequest, pk: int) -> JsonResponse:
    """The evaluation's whole report as the viewer may read it (the page links it)."""
    return _json_file(_load(pk).report_for(request.user), f"submission-{pk}-report.json")


@gzip_page
def sweep_json(request: HttpRequest, pk: int) -> JsonResponse:
    """The whole sweep report as the viewer may read it, verdict as the page reads it (the page
    links it: up to 2,000,000 bytes, docs/sweeps.md)."""
    return _json_file(sweep_reports.as_shown(_load(pk).sweep_for(request.user)), f"submission-{pk}-sweep.json")


def _json_file(data: Any, filename: str) -> JsonResponse:
    if not isinstance(data, dict):
        raise Http404("no such report yet")
    response = JsonResponse(data, json_dumps_params={"ensure_ascii": False})
    # Shown in the browser; saved under a name that says whose report it is.
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response
