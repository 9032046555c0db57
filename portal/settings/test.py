"""Tests: the real PostgreSQL and Redis of the machine unless DATABASE_URL says otherwise."""

from __future__ import annotations

import dj_database_url

from .base import *  # noqa: F403
from .env import envstr

DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")),
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_BROKER_URL = envstr("PKB_BROKER_URL", "redis://127.0.0.1:6379/15")
PKB_DAILY_SUBMISSION_CAP = 5
# Most tests submit with no worker running; the tests of the refusal turn it on.
PKB_REQUIRE_LIVE_WORKER = False
DEBUG = False
WHITENOISE_AUTOREFRESH = True
