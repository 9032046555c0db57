"""Where the client keeps its token and server: ``$XDG_CONFIG_HOME/pkb/config.json``
(``~/.config/pkb/config.json``), readable by its owner only. ``PKB_SERVER`` and ``PKB_TOKEN``
override the file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8000"


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "pkb" / "config.json"


def load() -> dict[str, Any]:
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def save(data: dict[str, Any]) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, path)
    return path


def server(explicit: str | None = None) -> str:
    """The portal's base URL. One given as the API's root (``.../api/v1/``, which the portal's
    pages and docs show) is cut back to the site: calls went to ``/api/v1/api/v1/...``, a 404."""
    url = (explicit or os.environ.get("PKB_SERVER") or load().get("server") or DEFAULT_SERVER).rstrip("/")
    for tail in ("/api/v1", "/api"):
        if url.endswith(tail):
            return url[: -len(tail)]
    return url


def token() -> str | None:
    return os.environ.get("PKB_TOKEN") or load().get("token")
