"""Production: PostgreSQL, Redis, gunicorn. Everything secret or site-specific comes from the
environment; starting without PKB_SECRET_KEY or DATABASE_URL is an error, not a fallback.

The defaults are those of a site behind a TLS proxy: HTTPS redirect, secure cookies, HSTS, so
that ``manage.py check --deploy`` is clean as shipped. A single machine without TLS (``make
prod`` on loopback) turns them off explicitly with ``PKB_HTTPS=0``; it says so when it starts.
"""

from __future__ import annotations

import os

from .env import SettingsError, envbool, envint, envstr

# Before base is read: its development fallbacks must never quietly stand in for these.
for _required in ("PKB_SECRET_KEY", "DATABASE_URL", "PKB_BROKER_URL"):
    if not os.environ.get(_required):
        raise SettingsError(f"{_required} must be set in production")

from .base import *  # noqa: E402,F403
from .base import DATABASES, REST_FRAMEWORK, SECRET_KEY  # noqa: E402
if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
    raise SettingsError("PKB_SECRET_KEY must be at least 50 characters of random text "
                        "(python -c 'import secrets; print(secrets.token_urlsafe(50))')")

DEBUG = False
HTTPS = envbool("PKB_HTTPS", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = envbool("PKB_SECURE_COOKIES", HTTPS)
CSRF_COOKIE_SECURE = envbool("PKB_SECURE_COOKIES", HTTPS)
SECURE_HSTS_SECONDS = envint("PKB_HSTS_SECONDS", 31536000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("PKB_HSTS_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = envbool("PKB_HSTS_PRELOAD", HTTPS)
# Behind the TLS proxy the connection's address is the proxy's: clients are told apart by the
# address the proxy appended to X-Forwarded-For, never by what a client wrote there itself.
REST_FRAMEWORK = {**REST_FRAMEWORK, "NUM_PROXIES": envint("PKB_NUM_PROXIES", 1 if HTTPS else 0)}
# Without TLS these checks describe the choice PKB_HTTPS=0 made on purpose; with TLS none applies.
SILENCED_SYSTEM_CHECKS = [] if HTTPS else ["security.W004", "security.W008", "security.W012",
                                           "security.W016"]
# A broken connection (the database restarted) is noticed before a request uses it.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": envstr("PKB_CACHE_URL", os.environ["PKB_BROKER_URL"]),
        # A Redis outage answers 503 within a second or two (portal.lib.outage), not a hang.
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    },
}
