"""The project's docs/*.md, served as they are (plain text), so that pages can link to the
document they cite ("docs/sweeps.md says how") instead of naming a file the visitor cannot open."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse


def docs_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def doc(request: HttpRequest, name: str) -> HttpResponse:
    """docs/<name>.md; the URL pattern admits a slug only, so nothing outside docs/ is reachable."""
    path = docs_dir() / f"{name}.md"
    if not path.is_file():
        raise Http404(f"no document docs/{name}.md")
    # text/plain: browsers show it; text/markdown makes most of them download the file
    return HttpResponse(path.read_text(encoding="utf-8"), content_type="text/plain; charset=utf-8")
