"""A table is columns plus rows of plain values: pages render it, exports write it as-is."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Column:
    key: str
    label: str
    kind: str = "text"  # text, int, float, pct, share (a pct with its interval), diff (a difference
    #                     of shares with its interval), ratio, speedup, date, link, run, model
    page: bool = True  # False: in exports only (a speedup cell shows its interval's ends itself)


def speedup_columns(key: str, label: str) -> list[Column]:
    """A speedup and its interval's ends: one cell on pages, three columns in exports.

    The rows carry ``key``, ``key_low``, ``key_high`` and ``key_note`` (the tooltip; pages only).
    """
    return [Column(key, label, "speedup"), Column(f"{key}_low", f"{label} low", "ratio", page=False),
            Column(f"{key}_high", f"{label} high", "ratio", page=False)]


def share_columns(key: str, label: str) -> list[Column]:
    """A share of problems and its 95% interval over them: one cell on pages (the share, the
    interval's ends under it), three columns in exports and the API (``key``, ``key_low``,
    ``key_high``). Rows may carry ``key_method`` (wilson or bootstrap) and ``interval_problems``
    for the tooltip; they are not columns."""
    return [Column(key, label, "share"), Column(f"{key}_low", f"{label} low", "pct", page=False),
            Column(f"{key}_high", f"{label} high", "pct", page=False)]


def difference_columns(key: str, label: str) -> list[Column]:
    """A difference of two shares with its 95% interval: one cell on pages, three columns in
    exports (``key``, ``key_low``, ``key_high``)."""
    return [Column(key, label, "diff"), Column(f"{key}_low", f"{label} low", "float", page=False),
            Column(f"{key}_high", f"{label} high", "float", page=False)]


@dataclass
class Table:
    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""  # shown under the table on pages: what it leaves out, and why

    @property
    def page_columns(self) -> list[Column]:
        return [c for c in self.columns if c.page]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title,
                "columns": [{"key": c.key, "label": c.label} for c in self.columns],
                "rows": [{c.key: _plain(row.get(c.key)) for c in self.columns} for row in self.rows]}

    def as_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([c.key for c in self.columns])
        for row in self.rows:
            writer.writerow(["" if row.get(c.key) is None else _inert(_plain(row.get(c.key)))
                             for c in self.columns])
        return out.getvalue()


def _inert(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (a username may start with + - @) gets a
    leading quote, which spreadsheets read as "this is text"; numbers stay numbers."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _plain(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, float):
        return round(value, 6)
    return value
