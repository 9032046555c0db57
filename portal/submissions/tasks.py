"""Portal-side Celery tasks (run by a worker that has Django, on the pkb.portal queue)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="portal.submissions.reap_stuck", ignore_result=True)
def reap_stuck() -> int:
    from .lifecycle import reap_stuck as reap

    return reap()
