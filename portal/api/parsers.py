"""The API's JSON parser: DRF's, with a body nested too deeply for Python's json answered as a
parse error. DRF turns only ValueError into one; json's RecursionError was a 500 whose logged
traceback ran to a thousand frames, and a worker retries a 500 for hours."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None


# For views that name their parsers: the same three DRF gives every view.
PARSERS = [JSONParser, parsers.MultiPartParser, parsers.FormParser]
