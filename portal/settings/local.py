"""One machine, no services: SQLite, a filesystem broker in var/broker, DEBUG on."""

from __future__ import annotations

import logging
import os

from .base import *  # noqa: F403
from .base import LOGGING, VAR_DIR
from .env import envbool, envstr

DEBUG = envbool("PKB_DEBUG", True)
ALLOWED_HOSTS = ["*"]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = envstr("PKB_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    for _sub in ("queue", "processed", "control"):
        os.makedirs(BROKER_DIR / _sub, exist_ok=True)
os.makedirs(VAR_DIR, exist_ok=True)


class _TracebacksOnly(logging.Filter):
    """`make up`: runserver's access line (django.server) already names every 4xx and 5xx; the
    request logger's "Not Found: /x" or "Service Unavailable: /x" would say it a second time.
    What it adds, a traceback, still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is not None


LOGGING = {**LOGGING, "filters": {"tracebacks_only": {"()": _TracebacksOnly}},
           "loggers": {**LOGGING["loggers"], "django.request": {"filters": ["tracebacks_only"]}}}
