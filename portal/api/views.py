"""The REST API: the same services as the pages, the same permissions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Prefetch
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.catalog.filters import ProblemFilter
from portal.catalog.models import Hardware, Problem, ProblemVersion
from portal.catalog.prompts import build_prompt
from portal.leaderboards import cache as board_cache
from portal.leaderboards import services as boards
from portal.submissions.models import AIModel, Submission
from portal.submissions.querysets import with_solved
from portal.submissions.services import (live_hardware, obvious_hardware, preferred_hardware, submit,
                                         submittable_problem)
from portal.submissions.validation import SubmissionError

from . import serializers as s
from .parsers import PARSERS
from .errors import ApiError, error_body
from .base import BaseListView, BaseRetrieveView, BaseView
from .throttles import SubmitThrottle, UserThrottle


class ApiRoot(BaseView):
    """Where to start: every endpoint of the API, the schema and the docs, as absolute URLs."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        def url(path: str) -> str:
            return request.build_absolute_uri(path)

        return Response({
            "name": settings.SPECTACULAR_SETTINGS["TITLE"], "version": "v1",
            "endpoints": {
                "problems": url("/api/v1/problems/"), "hardware": url("/api/v1/hardware/"),
                "prompt": url("/api/v1/prompt/"), "submissions": url("/api/v1/submissions/"),
                "model_leaderboard": url("/api/v1/leaderboards/models/"),
                "problem_leaderboard": url("/api/v1/leaderboards/problems/") + "{slug}/",
                "compare": url("/api/v1/compare/"), "runs": url("/api/v1/runs/"),
                "run_pkb_import": url("/api/v1/runs/pkb-import/"),
                "token": url("/api/v1/auth/token/")},
            "schema": url("/api/schema/"), "docs": url("/api/docs/"), "redoc": url("/api/redoc/"),
            "auth": "Authorization: Token <key>; reads are public, writes need a token",
            "errors": '{"error": {"code", "message", "field"}} with a 4xx or 5xx status',
        })


@csrf_exempt  # it changes nothing, and a POST to a wrong path must still get its 404
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """An unknown path under /api/: the API's error shape, not Django's HTML page."""
    return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}; "
                                   "GET /api/v1/ lists them."), status=404)


BUSIEST = "default: the hardware with the most finished results"


def _versions() -> Prefetch:
    return Prefetch("versions", queryset=ProblemVersion.objects.order_by("-created_at"))


class ProblemList(BaseListView):
    """Problems; filters: q, category, collective, codebase, solved=yes|no, hardware."""

    serializer_class = s.ProblemListSerializer

    def get_queryset(self) -> Any:
        filt = ProblemFilter.from_query(self.request.query_params)
        _check_filter(filt)
        return filt.apply(Problem.objects.active()).prefetch_related(_versions())


def _check_filter(filt: ProblemFilter) -> None:
    """A filter value the list does not know is refused: `solved=maybe` was ignored (every
    problem came back) and `hardware=` with a typo answered "solved anywhere", a wrong answer
    to the question asked."""
    if filt.solved not in ("", "yes", "no"):
        raise ApiError("invalid_choice", f"solved: {filt.solved!r} is not one of yes, no.",
                       field="solved")
    if filt.hardware:
        _hardware(filt.hardware)
    choices = filt.choices()
    for name, known in (("category", choices["categories"]), ("collective", choices["collectives"])):
        value = getattr(filt, name)
        if value and value not in known:
            raise ApiError("invalid_choice", f"{name}: {value!r} is not one of {', '.join(known)}.",
                           field=name)


class ProblemDetail(BaseRetrieveView):
    """One problem; ``solved`` as in the list (on ``hardware`` where given)."""

    serializer_class = s.ProblemDetailSerializer
    lookup_field = "slug"

    def get_queryset(self) -> Any:
        slug = self.request.query_params.get("hardware", "")
        hw = Hardware.objects.filter(slug=slug).first() if slug else None
        return with_solved(Problem.objects.prefetch_related(_versions()), hw.pk if hw else None)


class HardwareList(BaseListView):
    serializer_class = s.HardwareSerializer
    queryset = Hardware.objects.active()


class HardwareDetail(BaseRetrieveView):
    serializer_class = s.HardwareDetailSerializer
    lookup_field = "slug"
    queryset = Hardware.objects.all()


def _hardware(slug: str | None) -> Hardware:
    hw = Hardware.objects.active().filter(slug=slug).first() if slug else board_cache.default_hardware()
    if hw is None:
        known = ", ".join(Hardware.objects.active().values_list("slug", flat=True))
        raise ApiError("unknown_hardware", f"No hardware {slug!r}; known: {known}.", field="hardware")
    return hw


def _problem_version(slug: str, *, field: str | None = "problem") -> ProblemVersion:
    """The current version of an active problem, or a refusal naming the problem."""
    problem = Problem.objects.active().filter(slug=slug).first()
    if problem is None:
        if field is None:  # named in the path: a missing resource
            raise ApiError("not_found", f"No problem {slug!r}; GET /api/v1/problems/ lists them.",
                           status_code=status.HTTP_404_NOT_FOUND)
        raise ApiError("unknown_problem" if slug else "missing_field",
                       f"No problem {slug!r}; GET /api/v1/problems/ lists them." if slug
                       else "problem: name a problem by its slug.", field=field)
    version = problem.current_version()
    if version is None:
        raise ApiError("unknown_problem", f"{slug} has no loaded version.", field=field,
                       status_code=status.HTTP_404_NOT_FOUND if field is None else 400)
    return version


class Prompt(BaseView):
    @extend_schema(parameters=[OpenApiParameter("problem", str, required=True),
                               OpenApiParameter("hardware", str, description=(
                                   "default: the hardware a submission without one would go to "
                                   "(the one that runs the problem and that a worker serves, or the "
                                   "only one that runs it), else hardware a live worker serves (the "
                                   "one with the most results), else the one with the most results; "
                                   "the answer's `hardware` names it")),
                               OpenApiParameter("backend", str, enum=["torch", "triton", "cuda"],
                                                default="torch")],
                   responses={200: dict})
    def get(self, request: Request) -> Response:
        """The full prompt a bot needs: problem, reference, shapes, world size, hardware facts."""
        problem = request.query_params.get("problem", "").strip()
        version = _problem_version(problem)
        backend = request.query_params.get("backend", "torch")
        if backend not in ("torch", "triton", "cuda"):
            raise ApiError("invalid_choice", f"backend: {backend!r} is not one of torch, triton, cuda.",
                           field="backend")
        slug = request.query_params.get("hardware")
        # as a submission without hardware chooses: the busiest hardware might not run it at all
        hw = _hardware(slug) if slug else (obvious_hardware(problem) or preferred_hardware())
        if hw is None:
            raise ApiError("unknown_hardware", "No hardware is loaded.", field="hardware")
        return Response(build_prompt(version, hw, backend))


class SubmissionListCreate(BaseListView):
    """GET: your submissions. POST: submit a kernel (multipart file or JSON text in `source`)."""

    serializer_class = s.SubmissionSerializer
    permission_classes = [permissions.IsAuthenticated]
    parser_classes = PARSERS

    def get_throttles(self) -> list[Any]:
        if self.request.method == "POST":
            return [UserThrottle(), SubmitThrottle()]
        return super().get_throttles()

    def get_queryset(self) -> Any:
        return (Submission.objects.owned_by(self.request.user)
                .select_related("model", "hardware", "user", "problem_version__problem"))

    @extend_schema(request={"multipart/form-data": s.SubmitSerializer,
                            "application/json": s.SubmitSerializer},
                   responses={201: s.SubmissionDetailSerializer})
    def post(self, request: Request) -> Response:
        raw = self._source_bytes(request)
        form = s.SubmitSerializer(data={k: v for k, v in request.data.items() if k != "source"}
                                  | {"source": ""})
        form.is_valid(raise_exception=True)
        data = form.validated_data
        sub = submit(user=request.user, problem=data["problem"],
                     hardware=data["hardware"] or _obvious_hardware(data["problem"]),
                     backend=data["backend"], model=data["model"], provider=data["provider"],
                     source=raw, origin="api", sweep=data["sweep"], file_name=self._file_name(request))
        body = s.SubmissionDetailSerializer(sub, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)

    def _file_name(self, request: Request) -> str | None:
        upload = request.FILES.get("source")
        return upload.name if upload is not None else None

    def _source_bytes(self, request: Request) -> bytes:
        upload = request.FILES.get("source")
        if upload is not None:
            if upload.size > settings.PKB_MAX_SOURCE_BYTES:
                raise SubmissionError(
                    "source_too_large", f"The file is {upload.size:,} bytes; the limit is "
                    f"{settings.PKB_MAX_SOURCE_BYTES:,}.", status=413, field="source")
            return upload.read()
        text = request.data.get("source")
        if not isinstance(text, str):
            raise SubmissionError("missing_source", "Send the kernel as a file named "
                                  "`source` (multipart) or as text in `source` (JSON).",
                                  field="source")
        return text.encode("utf-8", errors="surrogatepass")


def _obvious_hardware(problem: str) -> str:
    submittable_problem(problem)  # an unknown problem is named as such, not as a hardware question
    hw = obvious_hardware(problem)
    if hw is not None:
        return hw.slug
    live = ", ".join(h.slug for h in live_hardware()) or "none"
    raise ApiError("missing_field", f"hardware: more than one hardware runs {problem!r}; name one "
                   f"(GET /api/v1/hardware/ lists them; with a live worker now: {live}).",
                   field="hardware")


class SubmissionDetail(BaseRetrieveView):
    """Status, queue position and the full evaluator report. The source: owner and staff only."""

    serializer_class = s.SubmissionDetailSerializer
    queryset = Submission.objects.select_related("model", "hardware", "user",
                                                 "problem_version__problem")


class ModelLeaderboard(BaseView):
    @extend_schema(parameters=[OpenApiParameter("hardware", str, description=BUSIEST)], responses={200: dict})
    def get(self, request: Request) -> Response:
        """Every model on one hardware: correct, fast_p, pass@k, fast_1@k, geo-mean speedup.

        Each share (``fast_1``, ``pass_at_1``, ...) has its 95% interval over the problems beside
        it (``fast_1_low``, ``fast_1_high``); ``intervals`` says how they are computed.

        ``ranked_by`` says how ``models`` is ordered: ``fast_1`` (then problems solved) on GPU;
        ``correctness`` (problems solved, then pass@1, then name) on CPU, whose timings are a
        smoke test."""
        hw = _hardware(request.query_params.get("hardware"))

        def compute() -> dict[str, Any]:
            track = board_cache.scored_track(hw)
            ranked = track.ranked()
            return {"hardware": hw.slug, "problems": len(track.problems),
                    "ranked_by": boards.ranked_by(hw), "intervals": boards.INTERVALS,
                    "models": boards.model_table(track, ranked).as_json()["rows"],
                    "categories": boards.category_table(ranked).as_json()["rows"]}

        return Response(board_cache.cached("api-models", (hw.pk,), compute))


class ProblemLeaderboard(BaseView):
    @extend_schema(parameters=[OpenApiParameter("hardware", str, description=BUSIEST)], responses={200: dict})
    def get(self, request: Request, slug: str) -> Response:
        """One correct submission per model on one problem, under the reference baseline.

        ``ranked_by``: ``speedup`` on GPU (each model's best, fastest first, ``rank`` 1, 2, ...);
        ``correctness`` on CPU (each model's first correct submission, earliest first, ``rank``
        null: CPU timings are a smoke test and rank nothing)."""
        version = _problem_version(slug, field=None)
        hw = _hardware(request.query_params.get("hardware"))

        def compute() -> dict[str, Any]:
            board = boards.problem_board(version, hw)
            return {"problem": slug, "version": version.version,
                    "hardware": board.hardware.slug, "ranked_by": boards.ranked_by(hw, "problem"),
                    "baseline_ms": board.baseline_ms,
                    "baseline": _baseline_json(board.baseline),
                    "rows": board.table.as_json()["rows"]}

        return Response(board_cache.cached("api-problem", (version.pk, hw.pk), compute))


def _model_names(values: list[str]) -> list[str]:
    """models=a,b and models=a&models=b mean the same; order kept, repeats dropped."""
    names = [m.strip() for value in values for m in value.split(",") if m.strip()]
    return list(dict.fromkeys(names))


def _baseline_json(base: boards.Baseline | None) -> dict[str, Any] | None:
    """How the baseline row was measured: beside a candidate, or the reference timed alone."""
    if base is None:
        return None
    return {"basis": base.basis, "median_ms": base.median_ms, "p10_ms": base.p10_ms,
            "p90_ms": base.p90_ms, "roofline_fraction": base.roofline_fraction,
            "submission": base.submission, "source_file": base.source_file or None,
            "date": base.date.isoformat() if base.date else None}


class Compare(BaseView):
    @extend_schema(parameters=[OpenApiParameter("hardware", str, description=BUSIEST),
                               OpenApiParameter("models", str, required=True, description=(
                                   "two or more model names: models=a,b or models=a&models=b"))],
                   responses={200: dict})
    def get(self, request: Request) -> Response:
        """Chart data for two or more models: fast_p curves, speedups, categories, failures.

        ``differences``: for every pair (the higher ranked first, ``a``), each metric of a minus
        b over the same problems with its 95% paired bootstrap interval (``low``, ``high``), and for
        shares of problems McNemar's exact ``p_value``, which then decides (``method``),
        ``distinguishable`` (the interval leaves out 0) and ``words`` ("not distinguishable on
        these 40 problems"); ``summary``: the pair in a sentence."""
        hw = _hardware(request.query_params.get("hardware"))
        names = _model_names(request.query_params.getlist("models"))
        if len(names) < 2:
            raise ApiError("too_few_models", "models: name two or more models, as models=a,b or "
                           "models=a&models=b.", field="models")
        unknown = sorted(set(names) - set(AIModel.objects.filter(name__in=names)
                                          .values_list("name", flat=True)))
        if unknown:
            raise ApiError("unknown_model", f"No model {', '.join(map(repr, unknown))}; "
                           "GET /api/v1/leaderboards/models/ lists them.", field="models")

        def compute() -> dict[str, Any]:
            track = board_cache.scored_track(hw)
            ranked = track.ranked(names)
            return {"hardware": hw.slug, "ranked_by": boards.ranked_by(hw),
                    "problems": len(track.problems), "intervals": boards.INTERVALS,
                    "models": boards.model_table(track, ranked).as_json()["rows"],
                    "differences": boards.differences(track, ranked),
                    "charts": boards.comparison_charts(track, ranked)}

        return Response(board_cache.cached("api-compare", (hw.pk, tuple(names)), compute))
