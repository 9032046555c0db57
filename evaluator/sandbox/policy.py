"""What a rank may see: the environment it gets, the host paths it can read, where it writes.

Shared by both kinds of box (confined and unconfined), so a candidate meets the same environment
either way and only the walls differ.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from contract.gpu import NO_MULTICAST_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]

# Where things are inside a confined side. The inbox (job, solution) is read-only; the rest
# lives on one size-limited tmpfs private to the side.
INBOX = Path("/pkb/in")
WORK = Path("/pkb/work")
HOME = Path("/pkb/home")
SANDBOX_UID = 1000  # the ranks' uid inside their user namespace (not root there either)

# Host directories every side needs read-only: the system, its libraries and tools (compilers,
# CUDA, ldconfig for Triton). /etc is needed by the loader and by compilers.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Device nodes a rank may open. Everything else under /dev does not exist inside.
DEVICE_NODES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEVICE_PREFIX = "nvidia"

# Variables a rank inherits from the evaluating process; everything else (broker URLs, tokens,
# database settings, the worker's own configuration) is left behind.
ENV_KEEP = frozenset({
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CUDA_HOME",
    "CUDA_PATH", "CC", "CXX", "CUDAHOSTCXX", "TORCH_CUDA_ARCH_LIST", "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "PKB_KERNEL_SEED",  # the build stage's cache (worker/prebuild.py), exposed read-only
})
ENV_KEEP_PREFIXES = ("NCCL_",)


def rank_env(device: str, threads: int, *, home: Path, work: Path, confined: bool,
             source: dict[str, str] | None = None) -> dict[str, str]:
    """A fresh environment: the allow-list above, then the settings the harness needs."""
    source = dict(os.environ) if source is None else source
    env = {k: v for k, v in source.items() if k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(NO_MULTICAST_ENV)
    env.update({
        "HOME": str(home), "USER": "pkb", "LOGNAME": "pkb", "TMPDIR": str(work / "tmp"),
        "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": str(threads),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": source.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        # Build caches are private to the side: a candidate cannot leave an entry for another.
        "PKB_KERNEL_CACHE": str(work / "kernel-cache"), "TRITON_CACHE_DIR": str(work / "triton"),
        "TORCH_EXTENSIONS_DIR": str(work / "torch-extensions"), "XDG_CACHE_HOME": str(home / ".cache"),
        "MAX_JOBS": "4",  # parallel compiler jobs of a torch extension build, within the task limit
    })
    if confined:
        env["TMPDIR"] = "/tmp"
        # Only a loopback exists in the side's network namespace; name it, since NCCL and gloo
        # otherwise look for the host's interfaces and addresses.
        env["NCCL_SOCKET_IFNAME"] = "lo"
        env["GLOO_SOCKET_IFNAME"] = "lo"
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


# Of the checkout, ranks see the packages they import and nothing else: a local site keeps
# its database, uploads and broker queue under the checkout.
REPO_PACKAGES = ("contract", "evaluator", "problems")


def python_paths() -> list[str]:
    """The interpreter, its standard library, its installed packages, the harness's packages.

    Of ``sys.path`` only what belongs to the installation is taken (below a prefix, or a
    site-packages or dist-packages folder): a script's own folder (``python /tmp/x.py`` puts /tmp
    first) or a test runner's would otherwise expose the host's /tmp or a home.
    """
    prefixes = {os.path.normpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    paths = sorted(prefixes) + [os.path.dirname(os.path.realpath(sys.executable))]
    for entry in sys.path:
        entry = os.path.normpath(entry) if entry and os.path.isabs(entry) else ""
        installed = any(entry == p or entry.startswith(p + "/") for p in prefixes)
        if entry and (installed or os.path.basename(entry) in ("site-packages", "dist-packages")):
            paths.append(entry)
    repo = str(REPO_ROOT)
    paths = [p for p in paths if not repo.startswith(p.rstrip("/") + "/") and p != repo]
    return paths + [str(REPO_ROOT / name) for name in REPO_PACKAGES]


# Never exposed, whatever asks for them: the host's shared scratch space, sockets and homes.
NEVER_EXPOSED = ("/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/run", "/var/run", "/proc", "/sys",
                 "/home", "/root")


def exposed_paths(source: dict[str, str] | None = None, extra: Sequence[str] = ()) -> list[str]:
    """Host paths bound read-only into a confined side, outermost first, without repeats
    (``extra``: more of them, such as the evaluator's bytecode cache)."""
    source = dict(os.environ) if source is None else source
    wanted = list(SYSTEM_DIRS) + python_paths() + [p for p in extra if os.path.isabs(p)]
    for name in ("LD_LIBRARY_PATH", "LIBRARY_PATH"):
        wanted += [p for p in source.get(name, "").split(":") if os.path.isabs(p)]
    wanted += [source[name] for name in ("CUDA_HOME", "CUDA_PATH") if os.path.isabs(source.get(name, ""))]
    wanted += compiler_prefixes(source)
    if os.path.isabs(source.get("PKB_KERNEL_SEED", "")):
        wanted.append(source["PKB_KERNEL_SEED"])
    # A link (a checkout's .venv linked to another checkout's) is recreated as the same link
    # inside the side (sandbox/init.py): what it points to must be there too.
    wanted += [os.path.realpath(p) for p in wanted if os.path.islink(p)]
    chosen: list[str] = []
    for path in sorted({os.path.normpath(p) for p in wanted if os.path.lexists(p)}, key=len):
        if path in NEVER_EXPOSED:
            continue
        if not any(path == c or path.startswith(c.rstrip("/") + "/") for c in chosen):
            chosen.append(path)
    return chosen


def compiler_prefixes(source: dict[str, str]) -> list[str]:
    """Where the compilers named by CC, CXX and CUDAHOSTCXX live (``/opt/gcc`` for ``/opt/gcc/bin/g++``):
    torch's extension builds and nvcc call them by these names."""
    prefixes = []
    for name in ("CC", "CXX", "CUDAHOSTCXX"):
        path = source.get(name, "").split(" ")[0]
        if os.path.isabs(path):
            folder = os.path.dirname(os.path.realpath(path))
            prefixes.append(os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder)
    return prefixes


def device_nodes(device: str) -> list[str]:
    nodes = [f"/dev/{name}" for name in DEVICE_NODES]
    if device == "cuda":
        nodes += sorted(f"/dev/{n}" for n in os.listdir("/dev") if n.startswith(GPU_DEVICE_PREFIX))
    return [n for n in nodes if os.path.exists(n)]
