from __future__ import annotations

from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from portal.catalog.models import Hardware
from portal.lib.exports import maybe_export
from portal.submissions.models import AIModel

from . import cache, services


def runs_tables(hardware: Hardware) -> list:
    """The runs on this hardware, ranked by their own scores (portal/runs)."""
    from portal.runs.models import Run
    from portal.runs.presenters import runs_table

    runs = list(Run.objects.filter(hardware=hardware).select_related("model", "hardware")[:200])
    return [runs_table(runs)] if runs else []


def seeded_runs(hardware: Hardware) -> list:
    """Runs seeded from committed results (portal/runs/board_seed.py): the page says where
    their numbers come from."""
    from portal.runs.models import Run, RunSample

    return list(Run.objects.filter(hardware=hardware).exclude(seeded_from="")
                .annotate(evaluated=Count("samples", filter=Q(samples__status=RunSample.ACCEPTED)))
                .select_related("model").order_by("pk"))


def _hardware(request: HttpRequest) -> Hardware | None:
    slug = request.GET.get("hardware")
    if not slug:
        return cache.default_hardware()
    found = Hardware.objects.active().filter(slug=slug).first()
    if found is None:
        raise Http404("no such hardware")
    return found


def models(request: HttpRequest) -> HttpResponse:
    hardware = _hardware(request)
    context: dict[str, object] = {"hardware": hardware, "hardware_list": Hardware.objects.active()}
    if hardware:
        def compute() -> dict[str, object]:
            track = cache.scored_track(hardware)
            ranked = track.ranked()
            return {"tables": [services.model_table(track, ranked), services.category_matrix(ranked)],
                    "problem_count": len(track.problems), "ranked": bool(ranked)}

        board = cache.cached("page-models", (hardware.pk,), compute)
        runs = runs_tables(hardware)  # not cached: a run can start before any result lands
        if response := maybe_export(request, board["tables"] + runs):
            return response
        context.update(board, runs_tables=runs, seeded_runs=seeded_runs(hardware),
                       board_generation=cache.generation())
    return render(request, "leaderboards/models.html", context)


def compare(request: HttpRequest) -> HttpResponse:
    hardware = _hardware(request)
    chosen = [m for m in request.GET.getlist("models") if m][:12]
    # A name no model has is left out and said so: it was drawn as a model scoring 0 everywhere
    # (the API refuses it: unknown_model).
    known = set(AIModel.objects.filter(name__in=chosen).values_list("name", flat=True))
    unknown = [m for m in chosen if m not in known]
    chosen = [m for m in chosen if m in known]
    context: dict[str, object] = {"hardware": hardware, "hardware_list": Hardware.objects.active(),
                                  "chosen": chosen, "unknown": unknown}
    if hardware:
        def compute() -> dict[str, object]:
            track = cache.scored_track(hardware)
            available = sorted(track.scores)
            names = chosen or available[:4]
            ranked = track.ranked(names)
            return {"available": available, "chosen": names, "enough": len(names) >= 2,
                    **services.compared(track, ranked)}

        board = cache.cached("page-compare", (hardware.pk, tuple(chosen)), compute)
        if response := maybe_export(request, board["tables"]):
            return response
        context.update(board, board_generation=cache.generation())
    return render(request, "leaderboards/compare.html", context)
