"""The API's one error shape: ``{"error": {"code", "message", "field"}}`` for every refusal.

Every DRF view goes through ``exception_handler`` (settings ``REST_FRAMEWORK
["EXCEPTION_HANDLER"]``), so a validation error, a missing token, a throttle, a 404 and a refused
upload all read the same way to a bot: ``code`` is stable and machine-readable, ``message`` is a
sentence for a person, ``field`` names the request field at fault (``null`` when none is).
A validation error that names several fields adds ``details``: one such object per problem.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.csrf import csrf_failure as django_csrf_page
from django.views.defaults import page_not_found as django_page_not_found
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.lib.outage import outage_of
from portal.submissions.validation import SubmissionError

log = logging.getLogger(__name__)

# DRF's codes for a field problem, renamed where the bare word says too little to a bot.
_FIELD_CODES = {"required": "missing_field", "null": "missing_field", "blank": "blank_field",
                "invalid_choice": "invalid_choice", "authorization": "bad_credentials"}
# Non-field validation errors carry no field; ``non_field_errors`` is DRF's bucket for them.
_NON_FIELD = {"non_field_errors", "__all__"}


class ApiError(exceptions.APIException):
    """A refusal raised by a view: a stable code, a sentence, the field at fault, an HTTP status."""

    def __init__(self, code: str, message: str, *, field: str | None = None,
                 status_code: int = status.HTTP_400_BAD_REQUEST,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail=message, code=code)
        self.code, self.message, self.field = code, message, field
        self.status_code = status_code
        self.headers = headers or {}

    @classmethod
    def from_submission_error(cls, exc: SubmissionError) -> ApiError:
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
        return cls(exc.code, exc.message, field=exc.field or None, status_code=exc.status,
                   headers=headers)


def error_body(code: str, message: str, field: str | None = None,
               details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message, "field": field}
    if details:
        body["details"] = details
    return {"error": body}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler decides the status and headers (WWW-Authenticate, Retry-After); the body is ours."""
    if isinstance(exc, SubmissionError):
        exc = ApiError.from_submission_error(exc)
    if isinstance(exc, RequestDataTooBig):
        # Django's own refusal of a body over DATA_UPLOAD_MAX_MEMORY_SIZE, raised where the body is
        # read: it was a 500, which a worker retries for hours (worker/delivery.py) holding its queue.
        exc = ApiError("request_too_large", f"The request body is larger than "
                       f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes, the most the API reads.",
                       status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, ApiError):
        return Response(error_body(exc.code, exc.message, exc.field), status=exc.status_code,
                        headers=exc.headers)
    response = drf_exception_handler(exc, context)
    if response is None:
        return _server_error(exc, context)
    if isinstance(exc, exceptions.ValidationError):
        problems = _validation_problems(exc.detail)
        first = problems[0] if problems else {"code": "invalid", "message": "Invalid request.",
                                              "field": None}
        response.data = error_body(first["code"], first["message"], first["field"],
                                   problems if len(problems) > 1 else None)
    else:
        message = _message_of(exc, response.data)
        if isinstance(exc, Http404):
            message = _not_found_message(message, context)
        response.data = error_body(_code_of(exc), message)
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            response["Retry-After"] = str(int(exc.wait) + (exc.wait % 1 > 0))
    return response


def _code_of(exc: Exception) -> str:
    if isinstance(exc, Http404):
        return "not_found"
    if isinstance(exc, DjangoPermissionDenied):
        return "permission_denied"
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        if isinstance(codes, str):
            return codes
    return getattr(exc, "default_code", "error")


def _message_of(exc: Exception, data: Any) -> str:
    if isinstance(data, dict) and "detail" in data:
        return str(data["detail"])
    return str(exc) or "Request refused."


# Django's "No Run matches the given query." named neither the id asked for nor where the real
# ones are: the object, as the URL named it, and the list to look in.
_DJANGO_NOT_FOUND = re.compile(r"^No (\w+) matches the given query\.$")
_LISTS = {"Run": ("run", "GET /api/v1/runs/ lists them"),
          "Problem": ("problem", "GET /api/v1/problems/ lists them"),
          "Hardware": ("hardware", "GET /api/v1/hardware/ lists the profiles (use the id)"),
          "Submission": ("submission", "GET /api/v1/submissions/ lists your own")}


def _not_found_message(message: str, context: dict[str, Any]) -> str:
    match = _DJANGO_NOT_FOUND.match(message)
    if not match:
        return message
    noun, where = _LISTS.get(match.group(1), (match.group(1).lower(), "GET /api/v1/ lists the "
                                              "endpoints"))
    kwargs = context.get("kwargs") or {}
    if "pk" in kwargs:
        return f"No {noun} {kwargs['pk']}; {where}."
    if "slug" in kwargs:
        return f"No {noun} {kwargs['slug']!r}; {where}."
    return f"No such {noun}; {where}."


def _validation_problems(detail: Any, prefix: str = "") -> list[dict[str, Any]]:
    """Flatten DRF's nested {field: [ErrorDetail]} into a list of {code, message, field}."""
    if isinstance(detail, dict):
        out: list[dict[str, Any]] = []
        for key, value in detail.items():
            name = None if key in _NON_FIELD else f"{prefix}{key}"
            if name is None and prefix:
                name = prefix.rstrip(".")
            out += _validation_problems(value, f"{name}." if name else "") if isinstance(
                value, dict) else _as_problems(value, name)
        return out
    return _as_problems(detail, prefix.rstrip(".") or None)


def _as_problems(value: Any, field: str | None) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, (dict, list)):
            out += _validation_problems(item, f"{field}." if field else "")
            continue
        code = getattr(item, "code", None) or "invalid"
        message = str(item)
        if field and not message.startswith(f"{field}:"):
            message = f"{field}: {message}"
        out.append({"code": _FIELD_CODES.get(code, code), "message": message, "field": field})
    return out


def _server_error(exc: Exception, context: dict[str, Any]) -> Response | None:
    """An unexpected exception: logged with its traceback, answered in the error shape.

    Under DEBUG it is left to Django's debug page, which shows the traceback to the developer.
    An unreachable database or Redis is left to ``handler500`` too (portal.lib.outage), which
    answers 503 with Retry-After for the API and the pages alike.
    """
    if settings.DEBUG or outage_of(exc) is not None:
        return None
    view = context.get("view")
    log.error("unhandled error in %s", type(view).__name__ if view else "an API view", exc_info=exc)
    return Response(error_body("server_error", "The server hit an unexpected error; it has been "
                               "logged. Try again, and report it if it persists."),
                    status=status.HTTP_500_INTERNAL_SERVER_ERROR)


class ErrorDetailSerializer(serializers.Serializer):
    """One problem: the schema of ``error`` and of each entry of ``error.details``."""

    code = serializers.CharField(help_text="stable, machine-readable: e.g. missing_field, "
                                           "unknown_problem, no_worker, throttled, not_found")
    message = serializers.CharField(help_text="a sentence saying what was wrong and what to do")
    field = serializers.CharField(allow_null=True, help_text="the request field at fault, or null")


class ErrorInnerSerializer(ErrorDetailSerializer):
    """The error: the one problem, or the first of several (then all of them in ``details``)."""

    details = ErrorDetailSerializer(many=True, required=False,
                                    help_text="every problem, when a request has several")


class ErrorSerializer(serializers.Serializer):
    """Every 4xx/5xx answer of the API."""

    error = ErrorInnerSerializer()


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A rejected CSRF check (settings.CSRF_FAILURE_VIEW): the API's error shape under /api/, where
    a bot that sent a stale session cookie must be told to use its token; Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("csrf_failed", f"CSRF check failed ({reason}). API clients "
                                       "authenticate with 'Authorization: Token <key>' and send "
                                       "no session cookie."), status=403)
    return django_csrf_page(request, reason=reason)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A URL that matches nothing (settings' handler404): the API's error shape under /api/ (a
    path segment with a newline matches no route, and a bot got Django's HTML page); Django's page
    elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "No such API endpoint or object; "
                                       "GET /api/v1/ lists the endpoints."), status=404)
    return django_page_not_found(request, exception)
