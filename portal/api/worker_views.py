"""Callbacks from GPU workers: authenticated by the submission's secret, not by a user."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.submissions.lifecycle import TransitionError, record_failure, record_report, record_status

from .serializers import WorkerReportSerializer, WorkerStatusSerializer
from .worker_auth import IsTheSubmissionsWorker, WorkerTokenAuthentication


class WorkerView(APIView):
    authentication_classes = [WorkerTokenAuthentication]
    permission_classes = [IsTheSubmissionsWorker]
    throttle_classes: list[Any] = []


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
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
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
                reason = data["error"] + (f"\n\nOutput:\n{data['output'][-3000:]}" if data["output"] else "")
                sub = record_failure(pk, reason, data["worker"])
        except TransitionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response({"status": sub.status})
