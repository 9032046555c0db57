"""How a worker proves it may speak for a submission: ``Authorization: Worker <job secret>``.

The secret comes with the job (contract.job.EvalJob.token); only its hash is stored, and the
first result spends it. Authentication yields the submission itself as ``request.auth``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from portal.submissions.models import Submission

KEYWORD = "Worker"


class SubmissionClosed(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "the submission takes no more worker messages"
    default_code = "submission_closed"


class WorkerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AnonymousUser, Submission]:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        pk = (request.parser_context or {}).get("kwargs", {}).get("pk")
        sub = Submission.objects.filter(pk=pk).only("id", "token_hash", "status").first()
        if sub is None:
            raise exceptions.NotFound(f"No submission {pk}.")
        if scheme == KEYWORD and sub.token_matches(token.strip()):
            return AnonymousUser(), sub
        if not sub.token_hash:  # spent by the first result: a late or repeated message
            raise SubmissionClosed(f"submission is already {sub.status}")
        raise exceptions.PermissionDenied("Bad worker token: send the job's secret as "
                                          f"`Authorization: {KEYWORD} <secret>`.")


class IsTheSubmissionsWorker(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, Submission)


class WorkerTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes it."""

    target_class = WorkerTokenAuthentication
    name = "workerToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": f"`{KEYWORD} <job secret>`: the secret that came with the job; the first "
                               "result spends it"}
