"""The OpenAPI schema says what an error looks like: every operation lists its error answers.

drf-spectacular documents only the success body by default; this schema class adds, per
operation, the 4xx answers that operation can give, each with the one error shape
(portal.api.errors.ErrorSerializer), so a client generated from the schema knows them.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import permissions

from .errors import ErrorSerializer

_DESCRIPTIONS = {
    "400": "Bad request: `error.code` says what (e.g. `missing_field`, `invalid_choice`, "
           "`unknown_problem`), `error.field` names the field.",
    "401": "Not authenticated (`not_authenticated`) or a bad token (`authentication_failed`).",
    "403": "Authenticated but not allowed (`permission_denied`).",
    "404": "No such object (`not_found`).",
    "409": "The submission takes no more messages (`submission_closed`, `conflict`).",
    "413": "The source is larger than the limit (`source_too_large`).",
    "429": "Throttled (`throttled`, with `Retry-After`) or the daily cap (`daily_cap`).",
    "503": "No worker serves the hardware (`no_worker`, with `Retry-After`).",
}


class ErrorDocumentingSchema(AutoSchema):
    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code in self._error_codes():
            if code not in responses:
                body = self._get_response_for_code(ErrorSerializer, code, direction=direction)
                body["description"] = _DESCRIPTIONS[code]
                responses[code] = body
        return responses

    def _error_codes(self) -> list[str]:
        codes = ["400"]
        if self._needs_credentials():
            codes += ["401", "403"]
        if "{" in self.path:
            codes.append("404")
        if "/worker/" in self.path:
            codes.append("409")
        submitting = self.method == "POST" and self.path.endswith("/submissions/")
        if submitting:
            codes += ["413", "503"]
        if self.view.get_throttles() or submitting:
            codes.append("429")
        return codes

    def _needs_credentials(self) -> bool:
        for perm in self.view.get_permissions():
            if isinstance(perm, permissions.AllowAny):
                continue
            if isinstance(perm, permissions.IsAuthenticatedOrReadOnly):
                if self.method not in permissions.SAFE_METHODS:
                    return True
                continue
            return True
        return False
