"""The REST API: the same services as the pages, the same permissions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from portal.catalog.filters import ProblemFilter
from portal.catalog.models import Hardware, Problem, ProblemVersion
from portal.catalog.prompts import build_prompt
from portal.leaderboards import services as boards
from portal.submissions.models import Submission
from portal.submissions.services import submit
from portal.submissions.validation import SubmissionError

from . import serializers as s
from .base import BaseListView, BaseRetrieveView, BaseView
from .throttles import SubmitThrottle, UserThrottle


def error_response(exc: SubmissionError) -> Response:
    return Response({"error": {"code": exc.code, "message": exc.message, "field": exc.field}},
                    status=exc.status)


def _versions() -> Prefetch:
    return Prefetch("versions", queryset=ProblemVersion.objects.order_by("-created_at"))


class ProblemList(BaseListView):
    """Problems; filters: q, category, collective, codebase, solved=yes|no, hardware."""

    serializer_class = s.ProblemListSerializer

    def get_queryset(self) -> Any:
        filt = ProblemFilter.from_query(self.request.query_params)
        return filt.apply(Problem.objects.active()).prefetch_related(_versions())


class ProblemDetail(BaseRetrieveView):
    serializer_class = s.ProblemDetailSerializer
    lookup_field = "slug"
    queryset = Problem.objects.prefetch_related(_versions())


class HardwareList(BaseListView):
    serializer_class = s.HardwareSerializer
    queryset = Hardware.objects.active()


class HardwareDetail(BaseRetrieveView):
    serializer_class = s.HardwareDetailSerializer
    lookup_field = "slug"
    queryset = Hardware.objects.all()


def _hardware(slug: str | None) -> Hardware:
    hw = Hardware.objects.active().filter(slug=slug).first() if slug else boards.default_hardware()
    if hw is None:
        raise NotFound(f"no hardware {slug!r}")
    return hw


class Prompt(BaseView):
    @extend_schema(parameters=[OpenApiParameter("problem", str, required=True),
                               OpenApiParameter("hardware", str, required=True),
                               OpenApiParameter("backend", str, enum=["torch", "triton", "cuda"])],
                   responses={200: dict})
    def get(self, request: Request) -> Response:
        """The full prompt a bot needs: problem, reference, shapes, world size, hardware facts."""
        problem = get_object_or_404(Problem.objects.active(), slug=request.query_params.get("problem", ""))
        version = problem.current_version()
        if version is None:
            raise NotFound("problem has no loaded version")
        backend = request.query_params.get("backend", "torch")
        if backend not in ("torch", "triton", "cuda"):
            raise ValidationError({"backend": "torch, triton or cuda"})
        return Response(build_prompt(version, _hardware(request.query_params.get("hardware")), backend))


class SubmissionListCreate(BaseListView):
    """GET: your submissions. POST: submit a kernel (multipart file or JSON text in `source`)."""

    serializer_class = s.SubmissionSerializer
    permission_classes = [permissions.IsAuthenticated]
    parser_classes = [JSONParser, MultiPartParser, FormParser]

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
        try:
            sub = submit(user=request.user, problem=data["problem"], hardware=data["hardware"],
                         backend=data["backend"], model=data["model"], provider=data["provider"],
                         source=raw, origin="api")
        except SubmissionError as exc:
            return error_response(exc)
        body = s.SubmissionDetailSerializer(sub, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)

    def _source_bytes(self, request: Request) -> bytes:
        upload = request.FILES.get("source")
        if upload is not None:
            if upload.size > settings.PKB_MAX_SOURCE_BYTES:
                raise _Refused(SubmissionError(
                    "source_too_large", f"The file is {upload.size:,} bytes; the limit is "
                    f"{settings.PKB_MAX_SOURCE_BYTES:,}.", status=413, field="source"))
            return upload.read()
        text = request.data.get("source")
        if not isinstance(text, str):
            raise _Refused(SubmissionError("missing_source", "Send the kernel as a file named "
                                           "`source` (multipart) or as text in `source` (JSON).",
                                           field="source"))
        return text.encode("utf-8", errors="surrogatepass")

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, _Refused):
            return error_response(exc.error)
        return super().handle_exception(exc)


class _Refused(Exception):
    def __init__(self, error: SubmissionError) -> None:
        super().__init__(error.message)
        self.error = error


class SubmissionDetail(BaseRetrieveView):
    """Status, queue position and the full evaluator report. The source: owner and staff only."""

    serializer_class = s.SubmissionDetailSerializer
    queryset = Submission.objects.select_related("model", "hardware", "user",
                                                 "problem_version__problem")


class ModelLeaderboard(BaseView):
    @extend_schema(parameters=[OpenApiParameter("hardware", str)], responses={200: dict})
    def get(self, request: Request) -> Response:
        """Every model on one hardware: correct, fast_p, pass@k, fast_1@k, geo-mean speedup."""
        hw = _hardware(request.query_params.get("hardware"))
        track = boards.track(hw)
        ranked = boards.scores(track)
        return Response({"hardware": hw.slug, "problems": len(track.problems),
                         "models": boards.model_table(track, ranked).as_json()["rows"],
                         "categories": boards.category_table(ranked).as_json()["rows"]})


class ProblemLeaderboard(BaseView):
    @extend_schema(parameters=[OpenApiParameter("hardware", str)], responses={200: dict})
    def get(self, request: Request, slug: str) -> Response:
        """Best correct submission per model on one problem, under the reference baseline."""
        problem = get_object_or_404(Problem, slug=slug)
        version = problem.current_version()
        if version is None:
            raise NotFound("problem has no loaded version")
        board = boards.problem_board(version, _hardware(request.query_params.get("hardware")))
        return Response({"problem": slug, "version": version.version,
                         "hardware": board.hardware.slug, "baseline_ms": board.baseline_ms,
                         "baseline": _baseline_json(board.baseline),
                         "rows": board.table.as_json()["rows"]})


def _baseline_json(base: boards.Baseline | None) -> dict[str, Any] | None:
    """How the baseline row was measured: beside a candidate, or the reference timed alone."""
    if base is None:
        return None
    return {"basis": base.basis, "median_ms": base.median_ms, "p10_ms": base.p10_ms,
            "p90_ms": base.p90_ms, "roofline_fraction": base.roofline_fraction,
            "submission": base.submission, "source_file": base.source_file or None,
            "date": base.date.isoformat() if base.date else None}


class Compare(BaseView):
    @extend_schema(parameters=[OpenApiParameter("hardware", str),
                               OpenApiParameter("models", str, description="comma-separated")],
                   responses={200: dict})
    def get(self, request: Request) -> Response:
        """Chart data for two or more models: fast_p curves, speedups, categories, failures."""
        hw = _hardware(request.query_params.get("hardware"))
        names = [m.strip() for m in request.query_params.get("models", "").split(",") if m.strip()]
        if len(names) < 2:
            raise ValidationError({"models": "name two or more models, comma-separated"})
        track = boards.track(hw)
        ranked = boards.scores(track, names)
        return Response({"hardware": hw.slug, "models": boards.model_table(track, ranked).as_json()["rows"],
                         "charts": boards.comparison_charts(track, ranked)})
