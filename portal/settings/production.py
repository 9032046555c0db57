"""Production: PostgreSQL, Redis, gunicorn. Everything secret or site-specific comes from the
environment; starting without PKB_SECRET_KEY or DATABASE_URL is an error, not a fallback."""

from __future__ import annotations

import os

from .base import *  # noqa: F403
from .env import SettingsError, envbool, envint

for _required in ("PKB_SECRET_KEY", "DATABASE_URL", "PKB_BROKER_URL"):
    if not os.environ.get(_required):
        raise SettingsError(f"{_required} must be set in production")

DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = envbool("PKB_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = envbool("PKB_SECURE_COOKIES", True)
SECURE_HSTS_SECONDS = envint("PKB_HSTS_SECONDS", 0)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": os.environ.get("PKB_CACHE_URL", os.environ["PKB_BROKER_URL"]),
    },
}
