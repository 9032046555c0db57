"""The API's documentation pages load nothing from the internet.

The Swagger UI and ReDoc assets are served locally (drf-spectacular-sidecar) and ReDoc's web
fonts are left out (templates/drf_spectacular/redoc.html). The ReDoc bundle itself draws a
"Redocly" logo from its CDN, so it is served through ``redoc_bundle`` with that address pointed
at this site's own icon. The pages also carry a Content-Security-Policy that allows only this
site, so whatever a future bundle reaches for is never fetched.
"""

from __future__ import annotations

from functools import lru_cache, wraps
from typing import Any, Callable

from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse
from django.templatetags.static import static
from django.views.decorators.cache import cache_control

REDOC_SIDECAR = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOC_REMOTE_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"

LOCAL_ONLY = "; ".join([
    "default-src 'self'",
    "img-src 'self' data: blob:",
    "style-src 'self' 'unsafe-inline'",  # both UIs style themselves inline
    "script-src 'self' 'unsafe-inline'",  # the pages' own init scripts
    "worker-src 'self' blob:",  # ReDoc's search index runs in a blob: worker
    "font-src 'self' data:",
    "connect-src 'self'",
])


def local_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = LOCAL_ONLY
        return response

    return wrapped


@lru_cache(maxsize=1)
def _patched_redoc() -> bytes:
    path = finders.find(REDOC_SIDECAR)
    if not path:
        raise FileNotFoundError(f"{REDOC_SIDECAR}: is drf-spectacular-sidecar installed?")
    with open(path, "rb") as fh:
        return fh.read().replace(REDOC_REMOTE_LOGO.encode(), static("pkb/favicon.svg").encode())


@cache_control(public=True, max_age=86400)
def redoc_bundle(request: HttpRequest) -> HttpResponse:
    """ReDoc's standalone bundle without its one remote address (see the module docstring)."""
    return HttpResponse(_patched_redoc(), content_type="text/javascript; charset=utf-8")
