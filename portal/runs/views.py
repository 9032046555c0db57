"""Run pages: the list, one run (matrix, scores, files, fast_p beside other runs), comparison."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from portal.catalog.models import Hardware
from portal.leaderboards import services as boards
from portal.lib.exports import maybe_export

from . import presenters, scoring
from .models import Run


def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.select_related("model", "hardware", "owner")
    hardware = Hardware.objects.filter(slug=request.GET.get("hardware") or "").first()
    if hardware:
        runs = runs.filter(hardware=hardware)
    runs = list(runs[:200])
    tables = [presenters.runs_table(runs)] if runs else []
    if response := maybe_export(request, tables):
        return response
    return render(request, "runs/list.html", {"tables": tables, "hardware": hardware,
                                              "hardware_list": Hardware.objects.active()})


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("model", "hardware", "owner"), pk=pk)
    result = scoring.scores(run, intervals=True)
    tables = [presenters.scores_table(result), presenters.files_table(run)]
    if response := maybe_export(request, tables):
        return response
    return render(request, "runs/detail.html", {
        "run": run, "result": result, "progress": scoring.progress(run),
        "matrix": presenters.matrix(run), "tables": tables,
        "remaining": presenters.remaining_files(run), "curves": presenters.curves_beside(run)})


def compare(request: HttpRequest) -> HttpResponse:
    """Two or more runs on one hardware, drawn with the model comparison's charts."""
    ids = [int(i) for i in request.GET.getlist("runs") if i.isdigit()][:12]
    runs = list(Run.objects.filter(pk__in=ids).select_related("model", "hardware"))
    context: dict[str, object] = {"runs": runs, "chosen": ids}
    hardware = {r.hardware_id for r in runs}
    if len(hardware) > 1:
        context["error"] = "Runs on different hardware cannot be compared: pick runs of one."
    elif runs:
        track = presenters.runs_track(runs)
        ranked = boards.scores(track, [r.label for r in runs], intervals=True)
        shown = boards.compared(track, ranked)
        tables = [t for t in shown["tables"] if t.name != "categories"]
        if response := maybe_export(request, tables):
            return response
        context.update(tables=tables, charts=shown["charts"], hardware=runs[0].hardware)
    context["available"] = Run.objects.select_related("model", "hardware").order_by("-created_at")[:100]
    return render(request, "runs/compare.html", context)
