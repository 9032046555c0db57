"""The API's JSON parsers: DRF's, with a body nested too deeply for Python's json answered as a
parse error (DRF turns only ValueError into one; json's RecursionError was a 500 whose logged
traceback ran to a thousand frames, and a worker retries a 500 for hours); and, for what users
send, text PostgreSQL cannot store (U+0000, a lone surrogate) refused as one too, where it was a
500 from the database. Workers' posts keep theirs: they carry a candidate's text, which is stored
with each such character replaced (api/serializers.py WorkerBodySerializer)."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from portal.lib.reports import without_nul


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None


class StorableJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        try:
            storable = without_nul(data) == data  # it replaces exactly those characters
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        if not storable:
            raise ParseError("JSON parse error - a string holds U+0000 (NUL) or a lone surrogate "
                             "(\\ud800-\\udfff), which is no text the portal can store.")
        return data


def _storable_fields(data: Any) -> Any:
    """A form's fields (a QueryDict) as they are, or the same parse error: a NUL in a multipart
    note reached PostgreSQL as the JSON one did."""
    if any("\x00" in key or any("\x00" in value for value in values if isinstance(value, str))
           for key, values in data.lists()):
        raise ParseError("Form parse error - a field holds U+0000 (NUL), which is no text the portal can store.")
    return data


class StorableMultiPartParser(parsers.MultiPartParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        _storable_fields(parsed.data)
        return parsed


class StorableFormParser(parsers.FormParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        return _storable_fields(super().parse(stream, media_type, parser_context))


# For views that name their parsers: the same three DRF gives every view.
PARSERS = [StorableJSONParser, StorableMultiPartParser, StorableFormParser]
