"""Portal-side Celery tasks (run by a worker that has Django, on the pkb.portal queue)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="portal.submissions.reap_stuck", ignore_result=True)
def reap_stuck() -> int:
    """Fail stuck submissions (with the reason) and re-send dispatches that were lost."""
    from .lifecycle import reap_stuck as reap
    from .services import redispatch_lost

    return reap() + redispatch_lost()
