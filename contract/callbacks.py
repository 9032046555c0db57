"""Where a worker reports on a submission: the portal routes these paths, the worker posts to them."""

from __future__ import annotations

# Relative to the API root (/api/v1/); the portal's URL patterns are built from these.
STATUS_ROUTE = "worker/submissions/<int:pk>/status/"
REPORT_ROUTE = "worker/submissions/<int:pk>/report/"
SWEEP_ROUTE = "worker/submissions/<int:pk>/sweep/"  # the sweep report, after the evaluation's
API_ROOT = "/api/v1/"


def submission_url(portal: str, submission_id: int) -> str:
    """The submission's worker endpoint on a portal reached at ``portal`` (scheme and host)."""
    return f"{portal.rstrip('/')}{API_ROOT}worker/submissions/{submission_id}/"


def status_url(submission_url_: str) -> str:
    return submission_url_.rstrip("/") + "/status/"


def report_url(submission_url_: str) -> str:
    return submission_url_.rstrip("/") + "/report/"


def sweep_url(submission_url_: str) -> str:
    return submission_url_.rstrip("/") + "/sweep/"
