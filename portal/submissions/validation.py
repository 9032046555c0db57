"""Checks on an uploaded kernel before anything is stored: each failure is one clear message."""

from __future__ import annotations

import ast
import re

MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+ -]{0,99}$")
PROVIDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+ (),&-]{0,99}$")
# What a wrong file looks like from its first bytes: said by name, with what to upload instead.
ARCHIVES = [(b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "a gzip archive"),
            (b"BZh", "a bzip2 archive"), (b"\xfd7zXZ\x00", "an xz archive"),
            (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive"), (b"Rar!", "a RAR archive")]
BINARIES = [(b"\x7fELF", "an ELF executable or shared library"), (b"%PDF-", "a PDF document"),
            (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
            (b"\xca\xfe\xba\xbe", "a compiled binary"), (b"\x89HDF", "an HDF5 file")]


class SubmissionError(Exception):
    """A request the portal refuses; ``code`` is stable for bots, ``status`` the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400, field: str = "",
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.field = code, message, status, field
        self.retry_after = retry_after  # seconds, for refusals that a later retry may pass


def check_file_name(name: str | None) -> None:
    """The name is never used as a path (the source is stored as text); it must still say that
    this is a Python file, so that a wrong file is refused with a reason, not parsed."""
    if name is None:
        return
    if not name.lower().endswith(".py") or name.startswith(".") or any(c in name for c in "\\/\x00"):
        raise SubmissionError("bad_file_name", f"Upload one Python source file named like "
                              f"solution.py (got {name[:80]!r}); archives, notebooks and other "
                              "files are not evaluated.", field="source")


def _sniff(raw: bytes) -> None:
    head = raw[:512]
    for magic, what in ARCHIVES:
        if head.startswith(magic):
            raise SubmissionError("archive", f"The file is {what}: upload the one .py file that "
                                  "defines solution(...), not an archive.", field="source")
    if raw[257:262] == b"ustar":
        raise SubmissionError("archive", "The file is a tar archive: upload the one .py file that "
                              "defines solution(...), not an archive.", field="source")
    for magic, what in BINARIES:
        if head.startswith(magic):
            raise SubmissionError("binary_source", f"The file is {what}: upload Python source "
                                  "text (a .py file that defines solution(...)).", field="source")
    if head.lstrip().startswith(b"{") and (b'"cells"' in raw[:65536] or b'"nbformat"' in raw[:65536]):
        raise SubmissionError("notebook", "The file is a Jupyter notebook: export the kernel as a "
                              ".py file (jupyter nbconvert --to script) and upload that.",
                              field="source")


def decode_source(raw: bytes, max_bytes: int) -> str:
    if not raw.strip():
        raise SubmissionError("empty_source", "The file is empty: upload a Python file that "
                              "defines solution(...).", field="source")
    if len(raw) > max_bytes:
        raise SubmissionError(
            "source_too_large", f"The file is {len(raw):,} bytes; the limit is {max_bytes:,}. "
            "Upload only the kernel module (no data, no vendored libraries).",
            status=413, field="source")
    _sniff(raw)
    if b"\x00" in raw:
        raise SubmissionError("binary_source", "The file contains NUL bytes: upload Python "
                              "source text, not a binary or archive.", field="source")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError("not_utf8", f"The file is not UTF-8 (byte {exc.start} is "
                              f"0x{raw[exc.start]:02x}): save it as UTF-8 and upload it again.",
                              field="source") from None
    return text.removeprefix("\ufeff")


def check_python(text: str) -> None:
    try:
        tree = ast.parse(text, filename="solution.py")
    except SyntaxError as exc:
        raise SubmissionError("syntax_error", f"Python syntax error at line {exc.lineno}: "
                              f"{exc.msg}", field="source") from None
    except (MemoryError, RecursionError) as exc:
        # Python's parser gives up on deep nesting with these, not a SyntaxError (thousands of
        # unary minuses, attribute lookups or calls): uncaught, an upload of such a file was a 500.
        raise SubmissionError("syntax_error", f"The file nests too deeply for Python to parse "
                              f"({type(exc).__name__}).", field="source") from None
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
    """A model name a user may upload or create a run under (uploads and runs only: the
    portal's own baselines and imports name their models themselves)."""
    name = (name or "").strip()
    if not MODEL_NAME.match(name):
        raise SubmissionError("bad_model_name", "Model name: 1-100 characters, letters, digits "
                              "and . _ : / @ + - or space, starting with a letter or digit.",
                              field="model")
    # "reference" is the problems' own code as the portal evaluates it: a user's upload under it
    # was a row "reference 9.00x" on the problem board, credited to no one; and a model named
    # "baseline: reference" was a second baseline row there, at whatever speed it got.
    if name.lower() == "reference" or name.lower().startswith("baseline:"):
        raise SubmissionError("bad_model_name", '"reference" names the problems\' reference '
                              "code, which the portal evaluates itself; upload under your "
                              'model\'s name, or "human".', field="model")
    return name


def check_provider(provider: str) -> str:
    provider = (provider or "").strip()
    if provider and not PROVIDER.match(provider):
        raise SubmissionError("bad_provider", "Provider: up to 100 characters, letters, digits, "
                              "spaces and . _ : / @ + ( ) , & -, starting with a letter or digit "
                              "(no markup).", field="provider")
    return provider
