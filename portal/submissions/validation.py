"""Checks on an uploaded kernel before anything is stored: each failure is one clear message."""

from __future__ import annotations

import ast
import re

MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+ -]{0,99}$")


class SubmissionError(Exception):
    """A request the portal refuses; ``code`` is stable for bots, ``status`` the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400, field: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.field = code, message, status, field


def decode_source(raw: bytes, max_bytes: int) -> str:
    if not raw.strip():
        raise SubmissionError("empty_source", "The file is empty.", field="source")
    if len(raw) > max_bytes:
        raise SubmissionError(
            "source_too_large", f"The file is {len(raw):,} bytes; the limit is {max_bytes:,}.",
            status=413, field="source")
    if b"\x00" in raw:
        raise SubmissionError("binary_source", "The file contains NUL bytes: upload Python "
                              "source text, not a binary or archive.", field="source")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError("not_utf8", f"The file is not UTF-8 (byte {exc.start} is "
                              f"0x{raw[exc.start]:02x}).", field="source") from None
    return text.removeprefix("\ufeff")


def check_python(text: str) -> None:
    try:
        tree = ast.parse(text, filename="solution.py")
    except SyntaxError as exc:
        raise SubmissionError("syntax_error", f"Python syntax error at line {exc.lineno}: "
                              f"{exc.msg}", field="source") from None
    if not any(_defines_solution(node) for node in tree.body):
        raise SubmissionError("missing_solution", "The module defines no top-level `solution` "
                              "(a function, or a name bound to one).", field="source")


def _defines_solution(node: ast.stmt) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name == "solution"
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == "solution" for t in node.targets)
    if isinstance(node, (ast.AnnAssign,)):
        return isinstance(node.target, ast.Name) and node.target.id == "solution"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((alias.asname or alias.name) == "solution" for alias in node.names)
    if isinstance(node, (ast.If, ast.Try)):
        return any(_defines_solution(n) for n in node.body)
    return False


def check_model_name(name: str) -> str:
    name = (name or "").strip()
    if not MODEL_NAME.match(name):
        raise SubmissionError("bad_model_name", "Model name: 1-100 characters, letters, digits "
                              "and . _ : / @ + - or space, starting with a letter or digit.",
                              field="model")
    return name
