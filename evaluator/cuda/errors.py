"""The one exception a candidate's build raises, whichever compiler failed."""

from __future__ import annotations


class CompileError(RuntimeError):
    """A CUDA or C++ build failed. ``compiler_output`` holds the compiler's log."""

    def __init__(self, message: str, compiler_output: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.compiler_output = compiler_output

    def __str__(self) -> str:
        if not self.compiler_output:
            return self.message
        return f"{self.message}\n{self.compiler_output}"
