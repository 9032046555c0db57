"""Builds are not trials: a rank says when it starts and ends a build, and the parent times it.

A ParallelKernelBench-style candidate compiles its extension inside its first ``solution()``
call (about 45 s of nvcc on the H200 hosts). Counted as part of that call, the build eats the
per-step limit and a slow build reads as a deadlock; and a build whose first call then fails
left ``compile_s: 0`` in the report. So every build is announced on the status channel as it
starts (``build``) and ends (``built``): the parent holds a building rank to the build limit
instead of the step limit, and measures build time on its own clock (evaluator/launcher.py).

What is a build here: ``evaluator.cuda``'s NVRTC and extension builds (which call
``building`` themselves), and torch's ``cpp_extension.load`` / ``load_inline``, wrapped by
``watch_torch_extensions`` before the candidate is imported. A failed torch build becomes a
``CompileError`` carrying the compiler's output, so it is judged ``compile_error``, not a
runtime error. Nested builds (our extension builder calls ``load_inline``) count once.

Candidate code could announce builds that are not (the channel is in its process): that buys
it at most the build limit of waiting, never a better score.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable, Iterator, Optional

_perf_counter = time.perf_counter

Announce = Callable[..., None]  # RankChannel.send(event, **payload)

BUILD = "build"  # channel events, mirrored in evaluator/channel.py
BUILT = "built"


class _BuildClock:
    def __init__(self) -> None:
        self.announce: Optional[Announce] = None
        self.depth = 0
        self.started = 0.0
        self.seconds = 0.0
        self.count = 0


_clock = _BuildClock()


def announce_to(send: Optional[Announce]) -> None:
    """Send ``build``/``built`` events through ``send`` (the rank's status channel)."""
    _clock.announce = send


def total_seconds() -> float:
    """Seconds this process has spent in builds so far (outermost builds only)."""
    running = _perf_counter() - _clock.started if _clock.depth else 0.0
    return _clock.seconds + running


@contextlib.contextmanager
def building(what: str) -> Iterator[None]:
    """Mark a build; the outermost of nested builds is the one announced and counted."""
    outermost = _clock.depth == 0
    _clock.depth += 1
    if outermost:
        _clock.started = _perf_counter()
        _send(BUILD, what=what[:200])
    try:
        yield
    finally:
        _clock.depth -= 1
        if outermost:
            seconds = _perf_counter() - _clock.started
            _clock.seconds += seconds
            _clock.count += 1
            _send(BUILT, what=what[:200], seconds=seconds, total_s=_clock.seconds)


def _send(event: str, **payload: Any) -> None:
    if _clock.announce is not None:
        _clock.announce(event, **payload)


def watch_torch_extensions() -> None:
    """Wrap ``torch.utils.cpp_extension.load`` and ``load_inline`` in ``building``.

    Called before the candidate's module is imported, so ``from torch.utils.cpp_extension
    import load_inline`` in candidate code gets the wrapped function.
    """
    import torch.utils.cpp_extension as cpp_extension

    for name in ("load", "load_inline"):
        original = getattr(cpp_extension, name)
        if getattr(original, "_pkb_build", False):
            continue
        setattr(cpp_extension, name, _as_build(original, name))


def _as_build(original: Callable[..., Any], api: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def build(*args: Any, **kwargs: Any) -> Any:
        name = kwargs.get("name", args[0] if args else "extension")
        with building(f"torch.utils.cpp_extension.{api}({name})"):
            try:
                return original(*args, **kwargs)
            except Exception as error:
                if type(error).__name__ == "CompileError":
                    raise
                from .cuda.errors import CompileError

                if isinstance(error, ImportError) and "cannot open shared object file" in str(error):
                    # This rank waited on torch's build lock while another built the same
                    # extension, which failed: that rank reports the compiler's output; this one
                    # says what it saw, with no output of its own (the side's diagnosis prefers
                    # the build failure that has the compiler's output).
                    raise CompileError(f"torch extension {name!s:.80} failed to build ({api}) in another "
                                       f"rank, which holds the compiler's output: {error}") from None
                # torch puts the compiler's output in the message of the error it raises.
                raise CompileError(f"torch extension {name!s:.80} failed to build ({api})",
                                   str(error)) from None

    build._pkb_build = True  # type: ignore[attr-defined]
    return build
