"""Parsers for ``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s`` text, and a safe runner."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any, Optional

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LINK = re.compile(r"Link\s+(\d+):\s*([\d.]+)\s*GB/s", re.IGNORECASE)
_GPU = re.compile(r"^GPU\s+(\d+):\s*(.*?)(?:\s*\(UUID.*)?$")


def run_smi(*args: str, timeout: float = 30.0) -> Optional[str]:
    """stdout of ``nvidia-smi ARGS``, or None where the tool is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _cells(line: str) -> list[str]:
    parts = [p.strip() for p in line.split("\t")]
    if len(parts) < 3:  # no tabs: fall back to runs of 2+ spaces
        parts = [p.strip() for p in re.split(r"\s{2,}", line)]
    return parts


def parse_topology(text: str) -> dict[str, Any]:
    """The matrix of ``nvidia-smi topo -m``: {cols, rows: {name: {col: value}}, extra, raw}.

    ``cols`` are the device columns (GPU0, NIC0, ...); ``extra`` holds the remaining columns
    per row (CPU Affinity, NUMA Affinity, ...).
    """
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    # The header row names GPU0 after an empty first cell; data rows start with their name.
    header_at = next((i for i, line in enumerate(lines) if re.search(r"\bGPU0\b", line)
                      and not re.match(r"(GPU|NIC)\d", line)), None)
    result: dict[str, Any] = {"cols": [], "rows": {}, "extra": {}, "raw": text}
    if header_at is None:
        return result
    header = [c for c in _cells(lines[header_at]) if c]
    device_cols = [c for c in header if re.fullmatch(r"(GPU|NIC|mlx\w*)\d+", c)]
    other_cols = header[len(device_cols):]
    result["cols"] = device_cols
    for line in lines[header_at + 1:]:
        if not line.strip():
            break
        cells = [c for c in _cells(line) if c != ""]
        if not cells or not re.fullmatch(r"(GPU|NIC)\d+", cells[0]):
            continue
        values = cells[1:]
        result["rows"][cells[0]] = dict(zip(device_cols, values[:len(device_cols)]))
        result["extra"][cells[0]] = dict(zip(other_cols, values[len(device_cols):]))
    return result


def parse_nvlink_status(text: str) -> dict[str, Any]:
    """Per GPU: active link count and speeds from ``nvidia-smi nvlink -s``.

    nvidia-smi prints each link's speed per direction, so the per-direction nominal of a GPU
    is the sum over its active links.
    """
    gpus: dict[str, dict[str, Any]] = {}
    current: Optional[dict[str, Any]] = None
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).strip()
        head = _GPU.match(line)
        if head:
            current = {"name": head.group(2).strip(), "links": 0, "link_gbps": [],
                       "inactive_links": 0}
            gpus[head.group(1)] = current
            continue
        if current is None:
            continue
        link = _LINK.search(line)
        if link:
            current["links"] += 1
            current["link_gbps"].append(float(link.group(2)))
        elif re.search(r"Link\s+\d+:.*inactive", line, re.IGNORECASE):
            current["inactive_links"] += 1
    for info in gpus.values():
        speeds = info["link_gbps"]
        info["per_link_gbps"] = max(speeds) if speeds else 0.0
        info["nominal_gbps_per_direction"] = round(sum(speeds), 1)
    return gpus
