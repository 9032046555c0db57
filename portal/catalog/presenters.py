"""Turn stored problem details and hardware profiles into what templates and charts need."""

from __future__ import annotations

import ast
import hashlib
import re
from typing import Any

from django.core.cache import cache
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from portal.lib.tables import Column, Table

from .models import Hardware, ProblemVersion

FORMATTER = HtmlFormatter(cssclass="code", linenos="table")


def highlighted(source: str) -> str:
    """Pygments HTML of ``source``, cached by its hash: a version's text never changes, and
    highlighting a long reference is most of a problem page's time."""
    key = f"pkb:code:{hashlib.sha256(source.encode()).hexdigest()}"
    html = cache.get(key)
    if html is None:
        html = highlight(source, PythonLexer(), FORMATTER)
        cache.set(key, html, timeout=7 * 24 * 3600)
    return html


def highlight_css() -> str:
    return FORMATTER.get_style_defs(".code")


def roofline_ms(traffic: dict[str, float], profile: dict[str, Any], dtype: str) -> dict[str, Any] | None:
    """Same formula as evaluator/roofline.py: the slowest of link, HBM and FLOPs."""
    block = profile.get("roofline") or {}
    try:
        link = float(block["link_gbps"]) * 1e9
        hbm = float(block["hbm_gbps"]) * 1e9
        tflops = block.get("tflops") or {}
        rate = float(tflops.get(dtype) or tflops.get("float32") or 0) * 1e12
    except (KeyError, TypeError, ValueError):
        return None
    times = {"link": traffic["link_bytes"] / link if link else 0.0,
             "hbm": traffic["hbm_bytes"] / hbm if hbm else 0.0,
             "flops": traffic["flops"] / rate if rate else 0.0}
    bound = max(times, key=times.__getitem__)
    return {"time_ms": times[bound] * 1e3, "bound": bound}


def shape_rows(version: ProblemVersion) -> list[dict[str, Any]]:
    rows = []
    for ws, by_size in sorted(version.details.get("shapes", {}).items(), key=lambda kv: int(kv[0])):
        for size, args in by_size.items():
            if "error" in args and isinstance(args["error"], str):
                rows.append({"world_size": ws, "size": size, "args": [], "error": args["error"]})
                continue
            rows.append({"world_size": ws, "size": size, "error": "", "args": [
                {"name": name, "text": _shape_text(info)} for name, info in args.items()]})
    return rows


def _shape_text(info: Any) -> str:
    if isinstance(info, list):
        return "[" + ", ".join(_shape_text(i) for i in info) + "]"
    if isinstance(info, dict) and "shape" in info:
        return f"{info['dtype']}[{', '.join(map(str, info['shape']))}]"
    if isinstance(info, dict):
        return str(info.get("value", info))
    return str(info)


def roofline_rows(version: ProblemVersion, hardware: list[Hardware]) -> list[dict[str, Any]]:
    """Traffic per world size and size, and the roofline time on each hardware that runs it."""
    dtype = (version.details.get("dtypes") or ["bfloat16"])[0]
    rows = []
    for hw in hardware:
        ws = hw.ranked_world_size(version.problem.world_sizes)
        traffic = version.traffic(ws, hw.size) if ws else None
        if not traffic or "error" in traffic:
            continue
        rows.append({"hardware": hw, "world_size": ws, "size": hw.size, "dtype": dtype, **traffic,
                     "roofline": roofline_ms(traffic, hw.profile, dtype)})
    return rows


def traffic_rows(version: ProblemVersion) -> list[dict[str, Any]]:
    rows = []
    for ws, by_size in sorted(version.details.get("traffic", {}).items(), key=lambda kv: int(kv[0])):
        for size, t in by_size.items():
            rows.append({"world_size": ws, "size": size, **t})
    return rows


# --- hardware --------------------------------------------------------------------------------

def link_matrix(profile: dict[str, Any]) -> dict[str, Any] | None:
    topo = profile.get("topology") or {}
    cols, rows = topo.get("cols") or [], topo.get("rows") or {}
    gpu_cols = [c for c in cols if c.startswith("GPU")]
    if not gpu_cols:
        return None
    return {"cols": gpu_cols, "rows": [{"name": r, "cells": [rows[r].get(c, "") for c in gpu_cols]}
                                       for r in rows if r.startswith("GPU")]}


def bandwidth_heatmap(profile: dict[str, Any]) -> dict[str, Any] | None:
    block = profile.get("p2p_bandwidth_gbps") or profile.get("p2p") or {}
    matrix = block.get("unidirectional_gbps") if isinstance(block, dict) else block
    if not isinstance(matrix, list) or not matrix:
        return None
    labels = [f"GPU{i}" for i in range(len(matrix))]
    return {"z": matrix, "x": labels, "y": labels,
            "concurrent": block.get("concurrent_all_peer_egress_gbps") if isinstance(block, dict) else None}


def collective_curves(profile: dict[str, Any]) -> dict[str, Any] | None:
    block = profile.get("nccl") or profile.get("gloo") or {}
    results = block.get("results") if isinstance(block, dict) else None
    if not isinstance(results, dict) or not results:
        return None
    series = {}
    for op, rows in results.items():
        if isinstance(rows, list):
            points = [(r.get("bytes"), r.get("busbw_gbps")) for r in rows if isinstance(r, dict)]
            series[op] = {"x": [p[0] for p in points if p[0]], "y": [p[1] for p in points if p[0]]}
    return {"backend": block.get("backend", ""), "world_size": block.get("world_size"),
            "dtype": block.get("dtype", ""), "series": series}


def nvlink_rows(profile: dict[str, Any]) -> list[dict[str, Any]]:
    per_gpu = (profile.get("nvlink") or {}).get("per_gpu") or {}
    return [{"gpu": k, "name": v.get("name", ""), "links": v.get("links"),
             "per_link_gbps": v.get("per_link_gbps")} for k, v in sorted(per_gpu.items())
            if isinstance(v, dict)]


_NOTE_LABELS = {"link_gbps": "Link bandwidth", "hbm_gbps": "Memory bandwidth", "tflops": "Compute"}
_DICT_LITERAL = re.compile(r"\{[^{}]*\}")
_CHOSE = re.compile(r"\s*\(chose ([^)]*)\)")


def roofline_notes(note: Any) -> list[str]:
    """A profile's roofline note as sentences: the probe writes ``key: text; key: text`` with
    Python dict literals inside; a reader gets one sentence per rate, with units."""
    if not isinstance(note, str) or not note.strip():
        return []
    sentences = []
    for part in note.split("; "):
        key, sep, text = part.partition(": ")
        label = _NOTE_LABELS.get(key.strip()) if sep else None
        text = text if label else part
        chosen = _CHOSE.search(text)
        text = _CHOSE.sub("", text)
        text = _DICT_LITERAL.sub(_spell_out, text).strip().rstrip(".")
        sentence = f"{label}: {text}" if label else text[:1].upper() + text[1:]
        if chosen:
            sentence += f"; the rate used is the {chosen.group(1)}"
        sentences.append(sentence + ".")
    return sentences


def _spell_out(match: re.Match[str]) -> str:
    try:
        values = ast.literal_eval(match.group(0))
    except (ValueError, SyntaxError):
        return match.group(0)
    if not isinstance(values, dict):
        return match.group(0)
    items = [f"{name} ({value:g} GB/s)" if isinstance(value, (int, float)) else f"{name} ({value})"
             for name, value in values.items()]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def hardware_table(rows: list[Hardware]) -> Table:
    """The hardware list as a table (page and CSV/JSON export); rows carry ``finished`` and
    ``live_workers`` (None: the job queue did not answer)."""
    columns = [Column("slug", "Profile"), Column("name", "Name"), Column("kind", "Kind"),
               Column("gpus", "GPUs", "int"), Column("world_size", "Ranked world size", "int"),
               Column("size", "Size preset"), Column("queue", "Queue"),
               Column("live_workers", "Live workers", "int"), Column("results", "Results", "int")]
    return Table("hardware", "Hardware", columns, [
        {"slug": hw.slug, "name": hw.name, "kind": hw.kind, "gpus": hw.gpus,
         "world_size": hw.world_size, "size": hw.size, "queue": hw.queue,
         "live_workers": getattr(hw, "live_workers", None), "results": getattr(hw, "finished", None)}
        for hw in rows])


def problem_table(problems: Any) -> Table:
    """The home page's problem table as an export: one row per problem, lists joined by spaces."""
    columns = [Column("number", "#", "int"), Column("slug", "Slug"), Column("title", "Title"),
               Column("categories", "Categories"), Column("collectives", "Collectives"),
               Column("source_codebase", "Source"), Column("world_sizes", "World sizes"),
               Column("solved", "Solved")]
    rows = [{"number": p.number, "slug": p.slug, "title": p.title,
             "categories": " ".join(p.categories), "collectives": " ".join(p.collectives),
             "source_codebase": p.source_codebase, "world_sizes": " ".join(map(str, p.world_sizes)),
             "solved": bool(getattr(p, "solved", False))} for p in problems]
    return Table("problems", "Problems", columns, rows)
