"""Serves plotly.min.js from the installed ``plotly`` package, so no CDN is needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

STATIC_NAME = "vendor/plotly.min.js"


def plotly_bundle() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str]:
        if path == STATIC_NAME and plotly_bundle().exists():
            return [str(plotly_bundle())] if find_all or kwargs.get("all") else str(plotly_bundle())
        return [] if find_all or kwargs.get("all") else ""

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        bundle = plotly_bundle()
        storage = FileSystemStorage(location=str(bundle.parent))
        storage.prefix = "vendor"  # type: ignore[attr-defined]
        yield bundle.name, storage
