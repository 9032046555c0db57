"""The transition table is the whole story of a submission's states: every state has a row, ended
states go nowhere, and every move a worker or the reaper makes is checked against it."""

from __future__ import annotations

from typing import Any

import pytest

from portal.submissions.lifecycle import (TRANSITIONS, TransitionError, record_failure, record_report,
                                          record_status)
from portal.submissions.models import PENDING, Status, Submission

pytestmark = pytest.mark.django_db


def test_every_state_has_a_row_and_ended_states_go_nowhere():
    assert set(TRANSITIONS) == set(Status.values)
    assert all(TRANSITIONS[s] == frozenset() for s in Status.values if s not in PENDING)
    assert all(Status.FAILED in TRANSITIONS[s] for s in PENDING)  # the reaper can always end a job


def test_an_ended_job_takes_no_further_message(job: Any, real_report: dict[str, Any]) -> None:  # noqa: F811
    sub, _ = job
    record_report(sub.pk, real_report, "w1")
    for move in (lambda: record_status(sub.pk, Status.RUNNING), lambda: record_report(sub.pk, real_report),
                 lambda: record_failure(sub.pk, "late")):
        with pytest.raises(TransitionError, match="already finished"):
            move()
    sub.refresh_from_db()
    assert sub.status == Status.FINISHED and sub.token_hash == ""


def test_a_late_compiling_after_running_changes_nothing_but_the_step(job: Any) -> None:  # noqa: F811
    sub, _ = job
    record_status(sub.pk, Status.RUNNING, "w1", "trial 1")
    record_status(sub.pk, Status.COMPILING, "w1", "late")
    sub = Submission.objects.get(pk=sub.pk)
    assert sub.status == Status.RUNNING and sub.running_at is not None
