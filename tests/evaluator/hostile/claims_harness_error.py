"""Attack (all-reduce): fail, and have the failure reported as the evaluator's own.

A failing rank tells the parent its failure's class in its ERROR message, and the rank-side
harness takes the class from a ``CandidateError`` as it is: candidate code raises one with
``FailureClass.HARNESS_ERROR`` (forging the message with the channel's token from memory would do
the same). The report's schema says ``harness_error`` is "our fault, never the candidate's": a
submitter's broken kernel would be counted as an evaluator failure, not as its own (the portal's
failure breakdown per model, and whoever decides to rerun evaluations that failed for us).

Measured 2026-11-29 on the 2-core machine, sandbox on and off: FAIL with ``harness_error: rank 0:
the reference side failed``.

Fix: ``SideDiagnosis._failure_from_problems`` never takes ``harness_error`` from a candidate's
rank (no harness code there reports it): a candidate's claim of it is its own ``runtime_error``.
"""

from evaluator.candidate import CandidateError
from evaluator.report import FailureClass


def solution(x, *, group):
    raise CandidateError(FailureClass.HARNESS_ERROR, "the reference side failed")
