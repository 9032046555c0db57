"""Callbacks from GPU workers: authenticated by the submission's secret, not by a user."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.submissions.lifecycle import (SweepRejected, TransitionError, record_failure, record_report, record_status,
                                          record_sweep, record_sweep_failure)

from .errors import ApiError, error_body
from .parsers import JSONParser
from .serializers import WorkerReportSerializer, WorkerStatusSerializer, WorkerSweepSerializer
from .worker_auth import IsTheSubmissionsWorker, WorkerTokenAuthentication


class WorkerView(APIView):
    authentication_classes = [WorkerTokenAuthentication]
    permission_classes = [IsTheSubmissionsWorker]
    throttle_classes: list[Any] = []
    parser_classes = [JSONParser]  # a candidate's NUL or lone surrogate is replaced, not refused


class WorkerStatus(WorkerView):
    @extend_schema(request=WorkerStatusSerializer, responses={200: dict},
                   description="Workers only: `Authorization: Worker <job token>`.")
    def post(self, request: Request, pk: int) -> Response:
        form = WorkerStatusSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            data = form.validated_data
            sub = record_status(pk, data["status"], data["worker"], data["step"])
        except TransitionError as exc:
            raise ApiError("conflict", str(exc), status_code=status.HTTP_409_CONFLICT) from exc
        return Response({"status": sub.status})


class WorkerReport(WorkerView):
    @extend_schema(request=WorkerReportSerializer, responses={200: dict},
                   description="Workers only: the evaluator report, or an error with output.")
    def post(self, request: Request, pk: int) -> Response:
        form = WorkerReportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            if data.get("report") is not None:
                sub = record_report(pk, data["report"], data["worker"])
            else:
                sub = record_failure(pk, form.failure_reason(), data["worker"])
        except TransitionError as exc:
            raise ApiError("conflict", str(exc), status_code=status.HTTP_409_CONFLICT) from exc
        return Response({"status": sub.status})


class WorkerSweep(WorkerView):
    @extend_schema(request=WorkerSweepSerializer, responses={200: dict},
                   description="Workers only: the sweep report after a passing evaluation, or an error.")
    def post(self, request: Request, pk: int) -> Response:
        form = WorkerSweepSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            if data.get("sweep") is not None:
                sub = record_sweep(pk, data["sweep"], data["worker"])
            else:
                sub = record_sweep_failure(pk, form.failure_reason(), data["worker"])
        except SweepRejected as exc:
            # Not this submission's sweep: say so on its page too, rather than wait for the reaper.
            record_sweep_failure(pk, f"The worker sent a sweep report that was refused: {exc}.", data["worker"])
            # Answered, not raised: the failure just recorded must stay stored.
            return Response(error_body("sweep_rejected", str(exc), "sweep"), status=status.HTTP_400_BAD_REQUEST)
        except TransitionError as exc:
            raise ApiError("conflict", str(exc), status_code=status.HTTP_409_CONFLICT) from exc
        return Response({"status": sub.status, "sweep_status": sub.sweep_status})
