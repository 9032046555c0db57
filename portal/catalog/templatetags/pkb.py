from __future__ import annotations

from typing import Any

from django import template

from portal.lib.exports import export_links
from portal.lib.tables import Table

register = template.Library()


@register.filter
def pct(value: Any) -> str:
    return "" if value is None else f"{100 * float(value):.1f}%"


@register.filter
def ratio(value: Any) -> str:
    return "" if value is None else f"{float(value):.2f}x"


@register.filter
def ms(value: Any) -> str:
    if value is None:
        return ""
    v = float(value)
    return f"{v * 1e3:.1f} us" if v < 0.1 else f"{v:.3f} ms"


@register.filter
def nbytes(value: Any) -> str:
    if value is None:
        return ""
    v = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.2f} {unit}"
        v /= 1024
    return str(value)


@register.filter
def sci(value: Any) -> str:
    return "" if value is None else f"{float(value):.3g}"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.inclusion_tag("partials/table.html", takes_context=True)
def render_table(context: Any, table: Table, link_problem: bool = False) -> dict[str, Any]:
    rows = [[(c, row.get(c.key)) for c in table.columns] for row in table.rows]
    return {"table": table, "rows": rows, "raw_rows": table.rows, "link_problem": link_problem,
            "exports": export_links(context["request"], table)}
