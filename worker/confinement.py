"""Whether this worker may run strangers' code: the evaluator's sandbox must work on this host,
or an operator must have said, explicitly, to run without it (reports then say ``sandbox: off``
and the portal marks them)."""

from __future__ import annotations

import logging

from evaluator.sandbox import unavailable_reason

from .config import WorkerConfig

log = logging.getLogger(__name__)


class SandboxUnavailable(RuntimeError):
    pass


def sandbox_flags(config: WorkerConfig) -> list[str]:
    """Extra `pkb eval` arguments for this host; raises when it must refuse jobs."""
    reason = unavailable_reason()
    if reason is None:
        return []
    if not config.allow_unsandboxed:
        raise SandboxUnavailable(
            f"this host cannot confine candidate code ({reason}); the worker takes no jobs. Enable "
            "unprivileged user namespaces (docs/sandbox.md), or set PKB_WORKER_ALLOW_UNSANDBOXED=1 "
            "to run candidates unconfined on a private queue")
    log.warning("running candidates WITHOUT the sandbox (PKB_WORKER_ALLOW_UNSANDBOXED=1): %s", reason)
    return ["--no-sandbox"]
