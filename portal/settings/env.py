"""Typed readers for settings from environment variables.

Each helper names the variable once and says what it turns into, so a bad value fails at start
with the variable's name instead of deep inside a library.
"""

from __future__ import annotations

import os


class SettingsError(ValueError):
    pass


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise SettingsError(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]
