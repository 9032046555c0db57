"""The build stage: a file's CUDA extensions compiled on the host's CPU cores ahead of its GPU
turn, into a cache that the evaluation reads (``PKB_KERNEL_SEED``: evaluator/cuda/extension.py
imports an entry of exactly its key instead of building).

No candidate code runs here. A ParallelKernelBench file's ``compile_cuda_extension(...)`` calls
whose arguments are literals or module-level constants (148 of the 149 importable files of
dab0830) are read from its syntax tree (inside the importer's wrapper, from ``_ORIGINAL``) and
built by the helper the evaluation uses (evaluator/cuda/pkb.py), each in a process of its own:
a clean environment, no GPU, CPU-time and file-size limits, a wall-clock limit. A call built from
anything else is left to the evaluation, which builds it as before; so is a build that fails here.

    python -m worker.prebuild --seed DIR --arch sm_90 [--jobs N] FILE...
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .config import CODE_ROOT

HELPER = "compile_cuda_extension"
CPU_SECONDS = 900
FILE_BYTES = 2 << 30
# What a build needs from the host's environment (the compiler and its libraries), nothing else.
KEEP = ("PATH", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CC", "CXX", "LANG")


@dataclass(frozen=True)
class Build:
    name: str
    cuda_src: str
    options: dict[str, Any] = field(default_factory=dict)  # the helper's keyword arguments


def static_builds(text: str) -> list[Build]:
    """The helper's calls in ``text`` (or in the original a wrapper carries) that need nothing
    but literals and module-level constants; others are skipped."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, MemoryError, RecursionError):  # deep nesting: no SyntaxError, nothing to build
        return []
    constants = _constants(tree)
    if isinstance(constants.get("_ORIGINAL"), str):  # the importer's wrapper around a PKB file
        return static_builds(constants["_ORIGINAL"])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == HELPER:
            try:
                args = [_value(a, constants) for a in node.args]
                kwargs = {k.arg: _value(k.value, constants) for k in node.keywords if k.arg}
            except ValueError:
                continue
            names = ("name", "cuda_src", "extra_cuda_cflags", "extra_include_paths", "extra_ldflags")
            if len(args) < 2 or len(args) > len(names) or len(kwargs) < len(node.keywords):
                continue
            options = {**dict(zip(names[2:], args[2:])), **kwargs}
            if isinstance(args[0], str) and isinstance(args[1], str):
                found.append(Build(args[0], args[1], options))
    return _unique(found)


def _unique(builds: list[Build]) -> list[Build]:
    seen: list[Build] = []
    for b in builds:
        if b not in seen:
            seen.append(b)
    return seen


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _constants(tree: ast.Module) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def _value(node: ast.expr, constants: dict[str, Any]) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        raise


def arch_list(arch: str) -> str:
    """``sm_90`` as TORCH_CUDA_ARCH_LIST spells it when it detects that GPU (9.0+PTX)."""
    digits = arch.removeprefix("sm_")
    return f"{digits[:-1]}.{digits[-1]}+PTX"


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))


def build_one(build: Build, seed: Path, arch: str, timeout_s: float) -> tuple[bool, float, str]:
    """One build in its own process; returns (built, seconds, the output's tail)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pkb-prebuild-") as home:
        env = {k: os.environ[k] for k in KEEP if k in os.environ}
        if "CUDA_HOME" not in env and Path("/usr/local/cuda/bin/nvcc").exists():
            env["CUDA_HOME"] = "/usr/local/cuda"  # where torch would look, had nvcc not been found
        path = os.pathsep.join(filter(None, [str(CODE_ROOT), os.environ.get("PYTHONPATH", "")]))
        env.update(HOME=home, TMPDIR=home, PYTHONPATH=path, PKB_KERNEL_CACHE=str(seed),
                   PKB_CUDA_ARCH=arch, TORCH_CUDA_ARCH_LIST=arch_list(arch), CUDA_VISIBLE_DEVICES="",
                   TORCH_EXTENSIONS_DIR=str(Path(home) / "torch-extensions"), MAX_JOBS="4",
                   PYTHONDONTWRITEBYTECODE="1")
        try:
            done = subprocess.run([sys.executable, "-P", "-m", "worker.prebuild", "--one"],
                                  input=json.dumps(asdict(build)), capture_output=True, text=True,
                                  env=env, cwd=home, timeout=timeout_s, preexec_fn=_limits)
        except subprocess.TimeoutExpired:
            return False, time.monotonic() - started, f"ran past {timeout_s:.0f} s"
    return done.returncode == 0, time.monotonic() - started, (done.stdout + done.stderr)[-2000:]


def _build_from_stdin() -> int:
    from evaluator.cuda.pkb import compile_cuda_extension

    build = json.loads(sys.stdin.read())
    compile_cuda_extension(build["name"], build["cuda_src"], **build["options"])
    return 0


def prebuild(files: list[Path], seed: Path, arch: str, jobs: int, timeout_s: float) -> int:
    """Every static build of ``files``, in their order, ``jobs`` at a time; prints one line each."""
    seed.mkdir(parents=True, exist_ok=True)
    work = [(f, b) for f in files for b in static_builds(f.read_text(errors="replace"))]
    print(f"prebuild: {len(work)} builds from {len(files)} files, {jobs} at a time, for {arch}", flush=True)

    def run(item: tuple[Path, Build]) -> bool:
        path, build = item
        ok, seconds, tail = build_one(build, seed, arch, timeout_s)
        print(f"prebuild: {path.name} {build.name}: {'built' if ok else 'FAILED'} in {seconds:.1f} s"
              + ("" if ok else f": {tail[-300:]!r}"), flush=True)
        return ok

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(run, work))
    return 0 if all(results) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--seed", type=Path, help="the cache to fill (PKB_KERNEL_SEED of the evaluations)")
    parser.add_argument("--arch", default="sm_90", help="the GPUs' architecture (sm_90: H100, H200)")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 4) // 4))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per build")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a build process
    args = parser.parse_args()
    if args.one:
        return _build_from_stdin()
    if args.seed is None:
        parser.error("--seed is required")
    return prebuild(args.files, args.seed, args.arch, args.jobs, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
