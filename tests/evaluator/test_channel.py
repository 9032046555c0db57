"""The status channel's parser (evaluator/channel.py): whatever a rank writes becomes events or
garbage, never an exception in the judge."""

from __future__ import annotations

from evaluator.channel import parse_lines


def test_lines_become_events_and_the_unfinished_rest_is_kept():
    events, rest = parse_lines(b'{"event": "ready", "rank": 0}\n{"event": "st')
    assert events == [{"event": "ready", "rank": 0}] and rest == b'{"event": "st'


def test_whatever_is_not_an_event_is_garbage_and_nesting_past_the_recursion_limit_too():
    # "[" * 100000 makes json.loads raise RecursionError, which is no ValueError: it used to end
    # the evaluation with no verdict, at the candidate's will (a red-team attack, 2026-11-27).
    lines = [b"[" * 100_000, b"not json", b"[1, 2]", b'{"no": "event"}']
    events, rest = parse_lines(b"\n".join(lines) + b"\n")
    assert [e["event"] for e in events] == ["garbage"] * 4 and rest == b""
