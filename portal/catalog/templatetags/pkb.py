from __future__ import annotations

from typing import Any

from datetime import date, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal.lib import reports
from portal.lib.exports import export_links
from portal.lib.tables import Table

register = template.Library()


@register.filter
def pct(value: Any) -> str:
    return "" if value is None else f"{100 * float(value):.1f}%"


@register.filter
def ratio(value: Any) -> str:
    return "" if value is None else f"{float(value):.2f}x"


ONE_VALUE_NOTE = ("No interval: its two ends are one value, as the timing gives from a single "
                  "round.")


@register.simple_tag
def speedup(value: Any, low: Any = None, high: Any = None, note: str = "",
            rounds: Any = None) -> str | SafeString:
    """``1.19x (1.17–1.21)`` with ``note`` as its tooltip; without an interval, a point estimate
    marked as such where ``note`` says why (a baseline row has neither). ``rounds``, where known:
    from fewer rounds than a 95% interval needs (reports.MIN_INTERVAL_ROUNDS) the ends are not
    one and are not bracketed; where unknown, ends that are one value (one round) are not."""
    if value is None:
        return ""
    if low not in (None, "") and high not in (None, ""):  # "": a missing attribute in a template
        known = isinstance(rounds, int) and not isinstance(rounds, bool)
        if known and rounds < reports.MIN_INTERVAL_ROUNDS:
            title = note or reports.too_few_rounds_note(rounds, float(low))
            return _no_interval(value, title, f"no interval ({rounds} round{'' if rounds == 1 else 's'})")
        if not known and float(low) == float(high):
            return _no_interval(value, note or ONE_VALUE_NOTE, "no interval")
        span = format_html('<span class="interval">({}–{})</span>', f"{float(low):.2f}", f"{float(high):.2f}")
        if not note:
            return format_html('<span class="speedup">{} {}</span>', ratio(value), span)
        return format_html('<span class="speedup" title="{}">{} {}</span>', note, ratio(value), span)
    if note:
        return _no_interval(value, note, "no interval")
    return ratio(value)


def _no_interval(value: Any, title: str, label: str) -> SafeString:
    return format_html('<span class="speedup point" title="{}">{} <small class="muted">{}</small></span>',
                       title, ratio(value), label)


@register.simple_tag
def speedup_cell(row: Any, key: str) -> str | SafeString:
    """A table row's speedup under ``key``, with ``key_low``, ``key_high``, ``key_note`` and
    ``key_rounds`` (how many rounds timed it, where its report says)."""
    return speedup(row.get(key), row.get(f"{key}_low"), row.get(f"{key}_high"), row.get(f"{key}_note", ""),
                   row.get(f"{key}_rounds"))


METHOD_WORDS = {"wilson": "Wilson score interval", "bootstrap": "percentile bootstrap over the problems"}


def _ends(row: Any, key: str) -> tuple[float, float] | None:
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    return None if low is None or high is None else (float(low), float(high))


@register.simple_tag
def share_cell(row: Any, key: str) -> str | SafeString:
    """A share of problems (``31.0%``) with its 95% interval's ends under it (``[22–40]``, in
    whole percent: narrow enough that the model board stays within 1400 px) and the exact ends
    and the method in the tooltip; without an interval, the share alone."""
    value = row.get(key)
    if value is None:
        return ""
    ends = _ends(row, key)
    if ends is None:
        return pct(value)
    n = row.get("interval_problems")
    over = f"the {n} problems" if n else "the problems"
    method = METHOD_WORDS.get(row.get(f"{key}_method", ""), "")
    title = (f"{pct(value)}, 95% interval over {over}: {100 * ends[0]:.1f}% to {100 * ends[1]:.1f}%"
             + (f" ({method})" if method else ""))
    return format_html('<span class="share" title="{}">{}<span class="interval">[{}–{}]</span></span>',
                       title, pct(value), f"{100 * ends[0]:.0f}", f"{100 * ends[1]:.0f}")


def _signed(value: float) -> str:
    return f"{100 * value:+.1f}".replace("-", "−")


@register.simple_tag
def diff_cell(row: Any, key: str) -> str | SafeString:
    """A difference of two shares in points (``+4.4``) with its 95% interval under it; bold
    where the interval leaves out 0, and the tooltip says in words what it means."""
    value = row.get(key)
    if value is None:
        return ""
    ends = _ends(row, key)
    if ends is None:
        return _signed(float(value))
    apart = not (ends[0] <= 0.0 <= ends[1])
    title = (f"{_signed(float(value))} points, 95% interval {_signed(ends[0])} to {_signed(ends[1])}: "
             f"{row.get(f'{key}_words', '')}")
    return format_html('<span class="diff {}" title="{}">{}<span class="interval">[{}, {}]</span></span>',
                       "apart" if apart else "level", title, _signed(float(value)),
                       _signed(ends[0]), _signed(ends[1]))


@register.filter
def when(value: Any) -> str | SafeString:
    """A human date (``24 Nov 2026, 09:27 UTC``) with the exact ISO 8601 value on hover.

    Takes a datetime, a date or an ISO string (profiles store ``measured_at`` as text)."""
    if value in (None, ""):
        return ""
    moment = _as_datetime(value)
    if moment is None:
        return str(value)
    if isinstance(moment, datetime):
        moment = timezone.localtime(moment) if timezone.is_aware(moment) else moment
        shown = f"{moment.day} {moment:%b %Y, %H:%M}" + (f" {moment:%Z}" if moment.tzinfo else "")
    else:
        shown = f"{moment.day} {moment:%b %Y}"
    return format_html('<time datetime="{}" title="{}">{}</time>', moment.isoformat(),
                       moment.isoformat(), shown)


def _as_datetime(value: Any) -> datetime | date | None:
    if isinstance(value, (datetime, date)):
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


@register.filter
def gbps(value: Any) -> str:
    """Bandwidth in GB/s (1e9 bytes/s, as nccl-tests reports it)."""
    if value is None:
        return ""
    v = float(value)
    return f"{v:.3g} GB/s" if v < 10 else f"{v:.1f} GB/s"


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
def render_table(context: Any, table: Table, link_problem: bool = False, level: int = 3) -> dict[str, Any]:
    """``level``: the title's heading level, one below the section it sits in (2 straight under
    a page's h1: an h3 there skipped a level, which screen readers' heading lists show)."""
    rows = [[(c, row.get(c.key), row) for c in table.page_columns] for row in table.rows]
    # A model's name links to its results per problem on the page's hardware (the comparison
    # page with that model alone), where the page has one.
    hardware = context.get("hardware")
    return {"table": table, "rows": rows, "raw_rows": table.rows, "link_problem": link_problem,
            "level": level, "hardware_slug": getattr(hardware, "slug", None),
            "exports": export_links(context["request"], table)}
