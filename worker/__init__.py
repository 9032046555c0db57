"""PKB evaluation worker: a Celery app with no Django and no database credentials.

It takes a job from its hardware's queue, runs the evaluator CLI in a subprocess under a time
limit, and POSTs status and the report back to the portal with the job's secret token.
Start one per GPU host:  PKB_BROKER_URL=redis://... celery -A worker worker -Q pkb.hw.<profile>
"""

from .app import app

__all__ = ["app"]
