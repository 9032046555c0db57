from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from portal.catalog.models import Hardware
from portal.lib.exports import maybe_export

from . import services


def _hardware(request: HttpRequest) -> Hardware | None:
    slug = request.GET.get("hardware")
    if not slug:
        return services.default_hardware()
    found = Hardware.objects.active().filter(slug=slug).first()
    if found is None:
        raise Http404("no such hardware")
    return found


def models(request: HttpRequest) -> HttpResponse:
    hardware = _hardware(request)
    context: dict[str, object] = {"hardware": hardware, "hardware_list": Hardware.objects.active()}
    if hardware:
        track = services.track(hardware)
        ranked = services.scores(track)
        tables = [services.model_table(track, ranked), services.category_table(ranked)]
        if response := maybe_export(request, tables):
            return response
        context.update(tables=tables, track=track, ranked=ranked)
    return render(request, "leaderboards/models.html", context)


def compare(request: HttpRequest) -> HttpResponse:
    hardware = _hardware(request)
    chosen = [m for m in request.GET.getlist("models") if m][:12]
    context: dict[str, object] = {"hardware": hardware, "hardware_list": Hardware.objects.active(),
                                  "chosen": chosen}
    if hardware:
        track = services.track(hardware)
        available = sorted({a.model for a in track.attempts})
        context["available"] = available
        if not chosen:
            chosen = available[:4]
            context["chosen"] = chosen
        ranked = services.scores(track, chosen)
        tables = [services.model_table(track, ranked), services.per_problem_table(track, ranked),
                  services.category_table(ranked), services.failure_table(ranked)]
        if response := maybe_export(request, tables):
            return response
        context.update(tables=tables, charts=services.comparison_charts(track, ranked),
                       enough=len(chosen) >= 2)
    return render(request, "leaderboards/compare.html", context)
