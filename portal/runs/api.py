"""The runs API: create a run, give it samples (one per request or an archive), import a
ParallelKernelBench directory, follow its progress, read its scores."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.base import BaseView
from portal.api.pagination import Pagination
from portal.catalog.models import Hardware
from portal.api.parsers import PARSERS
from portal.submissions.validation import SubmissionError

from . import archives, intake, scoring, services
from .models import Run, RunSample
from .pkb import names as pkb_names
from .pkb.importer import plans_from_pkb

MAX_TURN = 1_000_000  # an agent's turns; the run's k is at most PKB_RUN_MAX_K


class RunPages(Pagination):
    page_size = 500  # what one answer held before it had pages


def error_response(exc: SubmissionError) -> Response:
    """A refusal in the API's one error shape, {"error": {"code", "message", "field"}}."""
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
    return Response({"error": {"code": exc.code, "message": exc.message, "field": exc.field or None}},
                    status=exc.status, headers=headers)


def run_json(run: Run, request: Request | None = None) -> dict[str, Any]:
    """``url``: the run's page, absolute where the request is at hand (as every link the API
    gives: a bot follows it as it is)."""
    page = run.get_absolute_url()
    return {"id": run.pk, "model": run.model.name, "provider": run.provider,
            "sampling": run.sampling, "backend": run.backend, "precision": run.precision,
            "hardware": run.hardware.slug, "k": run.k, "note": run.note, "link": run.link,
            "imported_from": run.imported_from or None, "owner": run.owner.username,
            "created_at": run.created_at.isoformat(),
            "url": request.build_absolute_uri(page) if request is not None else page}


class _RunView(BaseView):
    parser_classes = PARSERS

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, SubmissionError):
            return error_response(exc)
        return super().handle_exception(exc)

    def run(self, pk: int) -> Run:
        return get_object_or_404(Run.objects.select_related("model", "hardware", "owner"), pk=pk)


def _fields(request: Request) -> dict[str, Any]:
    data = {k: request.data.get(k) for k in request.data.keys()
            if k not in ("archive", "source")}
    if isinstance(data.get("sampling"), str):  # multipart: the sampling settings as JSON text
        import json

        if len(data["sampling"]) > services.MAX_SAMPLING:  # before parsing: nested deep, it raises
            raise SubmissionError("bad_sampling", f"sampling: at most {services.MAX_SAMPLING} characters "
                                  "of JSON.", field="sampling")
        try:
            data["sampling"] = json.loads(data["sampling"]) if data["sampling"].strip() else {}
        except ValueError:
            raise SubmissionError("bad_sampling", "sampling: JSON text of an object.",
                                  field="sampling") from None
    return data


def _upload(request: Request, field: str, limit: int) -> bytes | None:
    upload = request.FILES.get(field)
    if upload is None:
        return None
    if upload.size > limit:
        raise SubmissionError("archive_too_large" if field == "archive" else "source_too_large",
                              f"The {field} is {upload.size:,} bytes; the limit is {limit:,}.",
                              status=413, field=field)
    return upload.read()


class RunListCreate(_RunView):
    permission_classes = [permissions.IsAuthenticatedOrReadOnly]

    @extend_schema(operation_id="runs_list",
                   parameters=[OpenApiParameter("hardware", str), OpenApiParameter("model", str),
                               OpenApiParameter("mine", bool)], responses={200: dict})
    def get(self, request: Request) -> Response:
        """Runs, newest first, 500 a page (``page``, ``page_size``; ``count``, ``next`` and
        ``previous`` as every list of the API has, beside ``runs``); filters: hardware, model,
        mine=1."""
        runs = Run.objects.select_related("model", "hardware", "owner")
        if hw := request.query_params.get("hardware"):
            if not Hardware.objects.filter(slug=hw).exists():  # it answered [] for a typo
                known = ", ".join(Hardware.objects.active().values_list("slug", flat=True))
                raise SubmissionError("unknown_hardware", f"No hardware {hw!r}; known: {known}.",
                                      field="hardware")
            runs = runs.filter(hardware__slug=hw)
        if model := request.query_params.get("model"):
            runs = runs.filter(model__name=model)
        if request.query_params.get("mine") in ("1", "true") and request.user.is_authenticated:
            runs = runs.filter(owner=request.user)
        # It was the first 500, with nothing to say that more existed.
        pages = RunPages()
        page = pages.paginate_queryset(runs, request, view=self) or []
        return Response({"count": pages.page.paginator.count, "next": pages.get_next_link(),
                         "previous": pages.get_previous_link(),
                         "runs": [run_json(r, request) for r in page]})

    @extend_schema(request=dict, responses={201: dict})
    def post(self, request: Request) -> Response:
        """Create a run: model, provider, sampling (object), backend, precision, hardware, k,
        note, link."""
        run = services.create_run(user=request.user, data=_fields(request))
        return Response(run_json(run, request), status=status.HTTP_201_CREATED)


class RunDetail(_RunView):
    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        """The run, its progress, and every file it was given with its status."""
        run = self.run(pk)
        files = [services.sample_json(s) for s in run.samples.select_related("problem")]
        return Response({**run_json(run, request), "progress": scoring.progress(run), "files": files})


class RunSamples(_RunView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=dict, responses={201: dict})
    def post(self, request: Request, pk: int) -> Response:
        """Add samples: `archive` (zip or tar of .py files: <problem>/<n>.py, <problem>.py or
        <problem>__<n>.py), or one sample as `source` (file or text) with `problem` (and, from
        an agent loop, `turn` and `context`). Returns one result per file."""
        run = self.run(pk)
        raw = _upload(request, "archive", settings.PKB_RUN_MAX_ARCHIVE_BYTES)
        if raw is not None:
            plans = intake.plans_from_archive(archives.read_archive(raw))
            if not plans:
                raise SubmissionError("empty_archive", "The archive holds no files.", field="archive")
        else:
            plans = [self._single(request)]
        rows = services.add_files(run, plans, user=request.user)
        results = [services.sample_json(r) for r in rows]
        accepted = sum(r["status"] == RunSample.ACCEPTED for r in results)
        return Response({"run": run.pk, "accepted": accepted, "rejected": len(results) - accepted,
                         "files": results}, status=status.HTTP_201_CREATED)

    def _single(self, request: Request) -> services.FilePlan:
        source = _upload(request, "source", settings.PKB_MAX_SOURCE_BYTES)
        if source is None:
            text = request.data.get("source")
            if not isinstance(text, str):
                raise SubmissionError("missing_source", "Send `archive` (zip or tar), or one "
                                      "sample as `source` (file or text) with `problem`.",
                                      field="source")
            source = text.encode("utf-8", errors="surrogatepass")
        turn = request.data.get("turn")
        try:
            turn_number = int(turn) if turn not in (None, "") else None
        except (TypeError, ValueError):
            turn_number = 0
        # Checked here, not by the database: -1 or 10**12 was a 500 from its integer column.
        if turn_number is not None and not 1 <= turn_number <= MAX_TURN:
            raise SubmissionError("bad_turn", f"turn: a whole number from 1 to {MAX_TURN}.", field="turn")
        name = request.data.get("name") or getattr(request.FILES.get("source"), "name", "") or "sample.py"
        return services.FilePlan(name=str(name), problem=str(request.data.get("problem") or ""),
                                 source=source, turn=turn_number,
                                 context=str(request.data.get("context") or "")[:100_000])


class RunProgress(_RunView):
    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        """Queued, running, finished and failed samples, in all and per problem."""
        return Response(scoring.progress(self.run(pk)))


class RunScores(_RunView):
    @extend_schema(parameters=[OpenApiParameter("partial", bool)], responses={200: dict, 409: dict})
    def get(self, request: Request, pk: int) -> Response:
        """fast_p, pass@k and fast_1@k over the run's problems and over the suite, each with its
        95% interval over the problems (``intervals``). 409 while samples are pending, unless
        partial=1."""
        run = self.run(pk)
        result = scoring.scores(run, intervals=True)
        if not result["run_problems"]["problems"]:
            return error_response(SubmissionError(
                "run_empty", "The run has no accepted samples yet: add some with "
                f"POST /api/v1/runs/{run.pk}/samples/.", status=409))
        if not result["complete"] and request.query_params.get("partial") not in ("1", "true"):
            return error_response(SubmissionError(
                "run_pending", f"{result['pending']} samples are still queued or running; "
                "scores are final when none is (or ask with partial=1).", status=409))
        return Response(result)


class PkbImport(_RunView):
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=dict, responses={201: dict})
    def post(self, request: Request) -> Response:
        """Import a ParallelKernelBench run directory as a new run: `archive` (zip or tar of
        solutions_<backend>_<precision>_<hardware>_<provider>_<model>/, or of its files with
        the name in `directory`), `hardware` (where to evaluate), optional k, note, link, and
        model/provider to override the directory's. With ?dry_run=1: each file's fate and the
        counts exactly as the import would give them (it runs, then is rolled back), nothing
        stored."""
        raw = _upload(request, "archive", settings.PKB_RUN_MAX_ARCHIVE_BYTES)
        if raw is None:
            raise SubmissionError("missing_archive", "Send the directory as `archive` (zip or tar).",
                                  field="archive")
        entries = archives.read_archive(raw)
        fields = _fields(request)
        directory = str(fields.get("directory") or _top_directory([e.path for e in entries]) or "")
        try:
            parsed = pkb_names.parse_run_dir(directory)
        except ValueError as exc:
            raise SubmissionError("bad_directory", f"{exc}. Name it in `directory` when the "
                                  "archive holds the files without their directory.",
                                  field="directory") from None
        plans = plans_from_pkb(entries)
        if not plans:
            raise SubmissionError("empty_archive", "The archive holds no files.", field="archive")
        dry_run = request.query_params.get("dry_run") in ("1", "true")
        # The dry run is the import itself, rolled back (dispatch happens only on commit), so it
        # reports exactly what the import would do: every check, every refusal, the counts.
        with transaction.atomic():
            run = services.create_run(user=request.user, imported_from=directory, data={
                "model": fields.get("model") or parsed.entry,
                "provider": fields.get("provider") or parsed.provider,
                "backend": "cuda" if parsed.backend == "parallelkittens" else parsed.backend,
                "precision": parsed.precision, "hardware": fields.get("hardware"),
                "k": fields.get("k") or 1, "note": fields.get("note") or
                f"ParallelKernelBench directory {directory} (generated for {parsed.hardware}).",
                "link": fields.get("link") or "", "sampling": fields.get("sampling") or {}})
            rows = services.add_files(run, plans, user=request.user)
            results = [services.sample_json(r) for r in rows]
            accepted = sum(r["status"] == RunSample.ACCEPTED for r in results)
            if dry_run or not accepted:  # a run with nothing to evaluate is not created
                transaction.set_rollback(True)
        if not accepted:
            return Response({"error": {"code": "nothing_accepted", "field": "archive", "message":
                                       "No file of the directory can be evaluated here; `files` "
                                       "says why for each. Nothing was stored."},
                             "files": [_dry(r) for r in results]}, status=400)
        counts = {"accepted": accepted, "rejected": len(results) - accepted}
        if dry_run:
            return Response({"directory": directory, "backend": run.backend, "precision": run.precision,
                             "provider": run.provider, "model": run.model.name,
                             "pkb_hardware": parsed.hardware, "hardware": run.hardware.slug,
                             "k": run.k, **counts, "files": [_dry(r) for r in results]})
        return Response({**run_json(run, request), **counts, "files": results}, status=status.HTTP_201_CREATED)


def _dry(result: dict[str, Any]) -> dict[str, Any]:
    """A file's fate in a dry run: as the import reports it, without the rolled-back ids."""
    return {**result, "submission": None}


def _top_directory(paths: list[str]) -> str | None:
    tops = {p.split("/", 1)[0] for p in paths if "/" in p and not archives.is_noise(p)}
    return tops.pop() if len(tops) == 1 else None
