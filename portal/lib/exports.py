"""``?export=csv|json&table=NAME`` on any page with tables returns that table as a file."""

from __future__ import annotations

import json
from typing import Sequence

from django.http import HttpRequest, HttpResponse, JsonResponse

from .tables import Table


def maybe_export(request: HttpRequest, tables: Sequence[Table]) -> HttpResponse | None:
    fmt = request.GET.get("export")
    if fmt not in ("csv", "json"):
        return None
    name = request.GET.get("table") or tables[0].name
    table = next((t for t in tables if t.name == name), None)
    if table is None:
        return HttpResponse(f"no table {name!r}; tables: {[t.name for t in tables]}",
                            status=404, content_type="text/plain")
    if fmt == "json":
        response: HttpResponse = JsonResponse(table.as_json(), json_dumps_params={"indent": 1})
    else:
        response = HttpResponse(table.as_csv(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="pkb-{table.name}.{fmt}"'
    return response


def export_links(request: HttpRequest, table: Table) -> dict[str, str]:
    query = request.GET.copy()
    query["table"] = table.name
    links = {}
    for fmt in ("csv", "json"):
        query["export"] = fmt
        links[fmt] = "?" + query.urlencode()
    return links


__all__ = ["export_links", "json", "maybe_export"]
