"""What a request gets while the database or Redis is unreachable: a 503 that says so.

Django turns any uncaught exception (in a view or a middleware) into a call of ``handler500``
with the exception still current, so one handler covers the API and the pages. An outage is a
503 with ``Retry-After``; every other error stays a plain 500. Nothing here touches the
database: the HTML page is rendered from a template that reads no user, session or model.
"""

from __future__ import annotations

import sys

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

RETRY_AFTER_S = 10

try:  # the cache and throttles live in Redis in production
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    _REDIS: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError)
except ImportError:  # pragma: no cover - redis is a portal dependency
    _REDIS = ()


def outage_of(exc: BaseException | None) -> str | None:
    """Which service ``exc`` says is unreachable ("database", "cache"), or None."""
    seen = 0
    while exc is not None and seen < 5:  # a wrapped error: look at its causes too
        if isinstance(exc, (OperationalError, InterfaceError)):
            return "database"
        if isinstance(exc, DatabaseError) and "connection" in str(exc).lower():
            return "database"
        if _REDIS and isinstance(exc, _REDIS):
            return "cache"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def wants_json(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", "")


def server_error(request: HttpRequest) -> HttpResponse:
    service = outage_of(sys.exc_info()[1])
    if service is None:
        if wants_json(request):
            return JsonResponse({"error": {"code": "server_error", "message": "Internal server "
                                           "error; it has been logged.", "field": ""}}, status=500)
        return HttpResponse(loader.render_to_string("500.html"), status=500)
    message = (f"The portal's {service} is unreachable for the moment; nothing was changed. "
               f"Try again in {RETRY_AFTER_S} seconds.")
    if wants_json(request):
        response: HttpResponse = JsonResponse(
            {"error": {"code": "service_unavailable", "message": message, "field": ""}}, status=503)
    else:
        response = HttpResponse(loader.render_to_string("503.html", {"message": message}),
                                status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
