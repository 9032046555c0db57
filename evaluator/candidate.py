"""Loading the function a rank runs: the problem's reference, or a candidate's ``solution``.

Runs inside rank processes only; the evaluating parent never imports candidate code.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Callable

from problems.spec import Problem

from .report import FailureClass


class CandidateError(Exception):
    """A failure the harness can classify before or while running the candidate."""

    def __init__(self, failure_class: FailureClass, message: str, *,
                 traceback: str | None = None, compiler_output: str | None = None) -> None:
        super().__init__(message)
        self.failure_class = failure_class
        self.message = message
        self.traceback = traceback
        self.compiler_output = compiler_output


def expected_parameters(problem: Problem) -> list[str]:
    return list(inspect.signature(problem.reference).parameters)


def load_solution(path: Path, problem: Problem) -> Callable[..., Any]:
    import traceback as tb

    spec = importlib.util.spec_from_file_location("pkb_candidate", path)
    if spec is None or spec.loader is None:
        raise CandidateError(FailureClass.IMPORT_ERROR, f"cannot load {path.name} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules["pkb_candidate"] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise CandidateError(FailureClass.SYNTAX_ERROR, f"line {exc.lineno}: {exc.msg}",
                             traceback=tb.format_exc()) from None
    except BaseException as exc:  # noqa: BLE001 - anything the module does at import is its fault
        raise classify_exception(exc, during="importing the solution") from None
    solution = getattr(module, "solution", None)
    if solution is None or not callable(solution):
        raise CandidateError(FailureClass.MISSING_SOLUTION,
                             "the file defines no callable named `solution`")
    check_signature(solution, problem)
    return solution


def check_signature(solution: Callable[..., Any], problem: Problem) -> None:
    expected = expected_parameters(problem)
    try:
        signature = inspect.signature(solution)
    except (TypeError, ValueError):
        return  # builtins and C functions: the call itself will tell
    try:
        signature.bind(**{name: None for name in expected})
    except TypeError as exc:
        raise CandidateError(
            FailureClass.SIGNATURE_MISMATCH,
            f"solution{signature} cannot be called as the reference is "
            f"(keywords {', '.join(expected)}): {exc}") from None


def classify_exception(exc: BaseException, *, during: str) -> CandidateError:
    """Map an exception raised by candidate code to a failure class."""
    import traceback as tb

    text = "".join(tb.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, CandidateError):
        return exc
    if type(exc).__name__ == "CompileError":
        # An empty output stays empty: it marks the rank that found no library because another
        # rank's build failed, and the side's diagnosis then reports the rank whose output is set.
        # Filling it with the message hid that (whichever rank spoke first was reported).
        output = getattr(exc, "compiler_output", None)
        return CandidateError(FailureClass.COMPILE_ERROR, f"compile error while {during}: {exc}",
                              traceback=text, compiler_output=str(exc) if output is None else output)
    if _is_out_of_memory(exc):
        return CandidateError(FailureClass.OUT_OF_MEMORY, f"out of memory while {during}: "
                              f"{_first_line(exc)}", traceback=text)
    if isinstance(exc, SyntaxError):
        return CandidateError(FailureClass.SYNTAX_ERROR, f"syntax error while {during}: {exc}",
                              traceback=text)
    failure = FailureClass.IMPORT_ERROR if during.startswith("importing") else FailureClass.RUNTIME_ERROR
    return CandidateError(failure, f"{type(exc).__name__} while {during}: {_first_line(exc)}",
                          traceback=text)


def _is_out_of_memory(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
