"""What the evaluating parent checks before any rank starts: the dtype asked for, and the file
(read, never imported: UTF-8, parses, defines ``solution``, leaves the hosts' multicast settings
alone)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

import torch

from contract.gpu import NO_MULTICAST_ENV
from problems.spec import DTYPE_NAMES, Problem

from .report import Failure, FailureClass, make_failure


def resolve_dtype(problem: Problem, name: Optional[str]) -> torch.dtype:
    if name is None:
        return problem.default_dtype
    if name not in DTYPE_NAMES:
        raise ValueError(f"unknown dtype {name!r}; use one of {sorted(DTYPE_NAMES)}")
    return DTYPE_NAMES[name]


def read_solution(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"solution file {path} does not exist")
    return path.read_bytes()


def static_failure(source: bytes) -> Optional[Failure]:
    """Checks that need no import: UTF-8 text that parses and defines ``solution``."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        return make_failure(FailureClass.SYNTAX_ERROR, f"the file is not UTF-8 text (byte {exc.start})")
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return make_failure(FailureClass.SYNTAX_ERROR, f"line {exc.lineno}: {exc.msg}",
                        traceback=f"{exc.text or ''}".rstrip())
    except (MemoryError, RecursionError) as exc:
        # Python's parser gives up on deep nesting with these, not a SyntaxError: thousands of
        # unary minuses overflow its stack (MemoryError), thousands of attribute lookups or calls
        # the recursion limit while the tree is built. Uncaught, they ended the evaluation with a
        # traceback and no verdict (red team, nests_past_the_parser); the file cannot be compiled
        # by a rank either.
        return make_failure(FailureClass.SYNTAX_ERROR, f"the file nests too deeply for Python to parse "
                            f"({type(exc).__name__})")
    if (setting := next((name for name in NO_MULTICAST_ENV if name in text), None)) is not None:
        # The hosts' GPUs are shared, and NVLink multicast can take them out of service: every
        # process starts with it off. These are environment variables a rank could change before
        # its first allocation; a file that names one is refused before it runs (docs/sandbox.md
        # says what this does not stop).
        return make_failure(FailureClass.PROTOCOL_VIOLATION,
                            f"the file names {setting}: the evaluation hosts run with NVLink multicast off "
                            f"({', '.join(f'{k}={v}' for k, v in NO_MULTICAST_ENV.items())}) and a "
                            "candidate may not change that; remove it (symmetric memory works without "
                            "multicast: its multicast pointer is then 0)")
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assigned = {t.id for node in tree.body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    imported = {alias.asname or alias.name for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    if "solution" not in names | assigned | imported:
        return make_failure(FailureClass.MISSING_SOLUTION,
                        "the file defines no top-level `solution`; define `def solution(...)` with the "
                        "reference's signature")
    return None
