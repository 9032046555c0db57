from __future__ import annotations

from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from portal.leaderboards.services import default_hardware, problem_board
from portal.lib.exports import maybe_export

from . import presenters
from .filters import ProblemFilter
from .models import Hardware, Problem


def problem_list(request: HttpRequest) -> HttpResponse:
    filt = ProblemFilter.from_query(request.GET)
    problems = filt.apply(Problem.objects.active())
    hardware = Hardware.objects.active()
    return render(request, "catalog/problem_list.html", {
        "problems": problems.prefetch_related("versions"), "filter": filt,
        "choices": filt.choices(), "hardware_list": hardware,
        "total": Problem.objects.active().count(),
    })


def problem_detail(request: HttpRequest, slug: str) -> HttpResponse:
    problem = get_object_or_404(Problem, slug=slug)
    versions = list(problem.versions.all())
    wanted = request.GET.get("version")
    version = next((v for v in versions if v.version == wanted), None) if wanted \
        else next((v for v in versions if v.is_current), versions[0] if versions else None)
    if version is None:
        raise Http404("no such version")
    hardware = list(Hardware.objects.active())
    chosen = _chosen_hardware(request, hardware)
    board = problem_board(version, chosen) if chosen else None
    if board and (response := maybe_export(request, [board.table])):
        return response
    return render(request, "catalog/problem_detail.html", {
        "problem": problem, "version": version, "versions": versions,
        "code": presenters.highlighted(version.source_text) if version.source_text else "",
        "code_css": presenters.highlight_css(),
        "shapes": presenters.shape_rows(version), "traffic": presenters.traffic_rows(version),
        "rooflines": presenters.roofline_rows(version, hardware),
        "hardware_list": hardware, "hardware": chosen, "board": board,
    })


def _chosen_hardware(request: HttpRequest, hardware: list[Hardware]) -> Hardware | None:
    slug = request.GET.get("hardware")
    if slug:
        found = next((h for h in hardware if h.slug == slug), None)
        if found is None:
            raise Http404("no such hardware")
        return found
    return default_hardware()


def hardware_list(request: HttpRequest) -> HttpResponse:
    rows = Hardware.objects.active().annotate(
        finished=Count("submissions", filter=Q(submissions__status="finished")))
    return render(request, "catalog/hardware_list.html", {"hardware_list": rows})


def hardware_detail(request: HttpRequest, slug: str) -> HttpResponse:
    hw = get_object_or_404(Hardware, slug=slug)
    profile = hw.profile
    return render(request, "catalog/hardware_detail.html", {
        "hw": hw, "links": presenters.link_matrix(profile),
        "heatmap": presenters.bandwidth_heatmap(profile),
        "curves": presenters.collective_curves(profile),
        "nvlink": presenters.nvlink_rows(profile),
        "software": profile.get("software") or {}, "gpus": profile.get("gpus"),
        "roofline": profile.get("roofline") or {},
    })
