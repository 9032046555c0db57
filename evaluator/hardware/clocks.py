"""GPU clocks, temperature and throttle reasons around a timed phase, from ``nvidia-smi``.

A speedup measured while a GPU changed its clocks (thermal or power slowdown, a boost that ramped
mid-run) compares two sides under different conditions; the report carries both snapshots and
flags the run instead of hiding it.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from .smi import run_smi

FIELDS = ("index", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw")
# clocks_event_reasons bits that slow a GPU down (idle, application clocks and sync boost are not):
# software power cap, hardware slowdown, software and hardware thermal, power brake.
SLOWDOWN_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
SM_CLOCK_MOVE = 0.02  # a change of the SM clock beyond this share flags the run
IDLE_BIT = 0x1  # the GPU was idle when asked: its clock says nothing about the timed work


def visible_gpus(count: int) -> list[int]:
    """The physical indices (nvidia-smi's) of the first ``count`` GPUs the ranks use."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible and all(part.strip().isdigit() for part in visible.split(",")):
        return [int(part) for part in visible.split(",")][:count]
    return list(range(count))


def _query(reason_field: str, gpus: list[int]) -> Optional[str]:
    return run_smi(f"--query-gpu={','.join(FIELDS)},{reason_field}", "--format=csv,noheader,nounits",
                   "-i", ",".join(map(str, gpus)), timeout=10.0)


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]"


def snapshot(gpus: list[int]) -> Optional[list[dict[str, Any]]]:
    """One row per GPU, or None where nvidia-smi is missing or fails."""
    # Older drivers name the field clocks_throttle_reasons; newer ones clocks_event_reasons.
    text = _query("clocks_event_reasons.active", gpus) or _query("clocks_throttle_reasons.active", gpus)
    if text is None:
        return None
    rows = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(FIELDS) + 1:
            continue
        index, sm, mem, temp, power, reasons = cells
        rows.append({"gpu": int(index), "sm_mhz": _number(sm), "mem_mhz": _number(mem),
                     "temperature_c": _number(temp), "power_w": _number(power),
                     "slowdown": bool(int(reasons, 16) & SLOWDOWN_BITS) if reasons.startswith("0x") else None,
                     "idle": bool(int(reasons, 16) & IDLE_BIT) if reasons.startswith("0x") else None,
                     "reasons": reasons})
    return rows or None


def compare(start: Optional[list[dict[str, Any]]], end: Optional[list[dict[str, Any]]]) -> dict[str, Any]:
    """``{"start", "end", "moved", "note"}``: moved when a GPU slowed down or its SM clock changed."""
    if not start or not end:
        return {"start": start, "end": end, "moved": False, "note": "nvidia-smi gave no clocks"}
    notes, asides = [], []
    for before, after in zip(start, end):
        gpu = before["gpu"]
        if before.get("slowdown") or after.get("slowdown"):
            notes.append(f"GPU {gpu} was slowed down (reasons {before['reasons']} -> {after['reasons']})")
        sm0, sm1 = before.get("sm_mhz"), after.get("sm_mhz")
        if before.get("idle") or after.get("idle"):
            asides.append(f"GPU {gpu} was idle when its clock was read ({sm0} -> {sm1} MHz): not compared")
        elif sm0 and sm1 and abs(sm1 - sm0) / sm0 > SM_CLOCK_MOVE:
            notes.append(f"GPU {gpu} SM clock moved {sm0:.0f} -> {sm1:.0f} MHz")
    note = "; ".join(notes + asides) or "clocks steady, no slowdown reported"
    return {"start": start, "end": end, "moved": bool(notes), "note": note}
