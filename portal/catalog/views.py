from __future__ import annotations

import json

from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from portal.leaderboards import cache as board_cache
from portal.leaderboards.services import best_per_hardware, problem_board
from portal.leaderboards.sweeps import problem_chart as sweep_chart
from portal.lib.exports import export_links, maybe_export
from portal.submissions.workers import liveness

from . import presenters
from .filters import ProblemFilter
from .models import Hardware, Problem


def problem_list(request: HttpRequest) -> HttpResponse:
    """The home page: what the benchmark is, how it scores, who leads, then the problem table."""
    filt = ProblemFilter.from_query(request.GET)
    problems = filt.apply(Problem.objects.active())
    table = presenters.problem_table(problems)
    if response := maybe_export(request, [table]):
        return response
    hardware = Hardware.objects.active()
    return render(request, "catalog/problem_list.html", {
        "problems": problems.prefetch_related("versions"), "filter": filt,
        "choices": filt.choices(), "hardware_list": hardware,
        "total": Problem.objects.active().count(),
        "best": [] if filt.active else board_cache.cached("home-best", (), best_per_hardware),
        "exports": export_links(request, table),
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
    board = board_cache.cached("page-problem", (version.pk, chosen.pk),
                               lambda: problem_board(version, chosen)) if chosen else None
    if board and (response := maybe_export(request, [board.table])):
        return response
    return render(request, "catalog/problem_detail.html", {
        "problem": problem, "version": version, "versions": versions,
        "code": presenters.highlighted(version.source_text) if version.source_text else "",
        "code_css": presenters.highlight_css(),
        "shapes": presenters.shape_rows(version), "traffic": presenters.traffic_rows(version),
        "rooflines": presenters.roofline_rows(version, hardware),
        "hardware_list": hardware, "hardware": chosen, "board": board,
        "sweep_axis": version.details.get("sweep"),
        "sweep_chart": sweep_chart(version, chosen) if chosen else None,
    })


def _chosen_hardware(request: HttpRequest, hardware: list[Hardware]) -> Hardware | None:
    slug = request.GET.get("hardware")
    if slug:
        found = next((h for h in hardware if h.slug == slug), None)
        if found is None:
            raise Http404("no such hardware")
        return found
    return board_cache.default_hardware()


def hardware_list(request: HttpRequest) -> HttpResponse:
    rows = list(Hardware.objects.active().annotate(
        finished=Count("submissions", filter=Q(submissions__status="finished"))))
    state = liveness()
    for hw in rows:
        hw.live_workers = state.count(hw.queue)
    table = presenters.hardware_table(rows)
    if response := maybe_export(request, [table]):
        return response
    return render(request, "catalog/hardware_list.html", {"hardware_list": rows, "table": table})


def hardware_detail(request: HttpRequest, slug: str) -> HttpResponse:
    hw = get_object_or_404(Hardware, slug=slug)
    profile = hw.profile
    return render(request, "catalog/hardware_detail.html", {
        "hw": hw, "live_workers": liveness().count(hw.queue),
        "roofline_notes": presenters.roofline_notes((profile.get("roofline") or {}).get("note")),
        "raw_profile": json.dumps(profile, indent=1, sort_keys=True), "links": presenters.link_matrix(profile),
        "heatmap": presenters.bandwidth_heatmap(profile),
        "curves": presenters.collective_curves(profile),
        "nvlink": presenters.nvlink_rows(profile),
        "software": profile.get("software") or {}, "gpus": profile.get("gpus"),
        "roofline": profile.get("roofline") or {},
    })
