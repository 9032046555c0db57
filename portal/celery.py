"""The portal's Celery app: sends evaluation jobs to hardware queues, runs the reaper.

Evaluation tasks themselves live in the top-level ``worker`` package (no Django there); the
portal only sends them by name.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["portal.submissions"])
