"""The portal's REST API (``/api/v1/``) as calls that return JSON or raise ``ApiError``."""

from __future__ import annotations

from typing import Any

import requests

from . import exits


# 5xx answers that are the portal's decision, not a fault: the request was understood and refused
# (no live worker serves that hardware, 503 with Retry-After), so a script should not treat the
# portal as down. Any other 5xx, or a 503 from a proxy without the portal's error body, is.
REFUSING_SERVER_CODES = frozenset({"no_worker"})


class ApiError(Exception):
    """A request that did not succeed; ``exit_code`` is what the command line returns."""

    def __init__(self, message: str, *, code: str = "", status: int | None = None,
                 body: Any = None) -> None:
        super().__init__(message)
        self.message, self.code, self.status, self.body = message, code, status, body

    @property
    def exit_code(self) -> int:
        if self.status is not None and self.code in REFUSING_SERVER_CODES:
            return exits.REFUSED
        if self.status is None or self.status >= 500:
            return exits.UNREACHABLE
        if self.status in (401, 403):
            return exits.AUTH
        return exits.REFUSED

    def as_json(self) -> dict[str, Any]:
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return {**self.body, "error": {**self.body["error"], "status": self.status}}
        return {"error": {"code": self.code or "error", "message": self.message,
                          "status": self.status}}


class Api:
    def __init__(self, server: str, token: str | None = None, timeout_s: float = 60.0) -> None:
        self.base = server.rstrip("/") + "/api/v1/"
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "pkb-client"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"
        self.timeout_s = timeout_s

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, *, json: Any = None, data: Any = None, files: Any = None) -> Any:
        return self._call("POST", path, json=json, data=data, files=files)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = self.base + path.lstrip("/")
        try:
            response = self.session.request(method, url, timeout=self.timeout_s, **kwargs)
        except requests.RequestException as exc:
            raise ApiError(f"cannot reach {self.base}: {exc}", code="unreachable") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.ok:
            return body
        raise _error(response.status_code, body, response.text)


def _error(status: int, body: Any, text: str) -> ApiError:
    """The portal's errors come as {"error": {"code", "message", "field"}}; DRF's own as
    {"detail": ...} or {field: [messages]}."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        field = f" ({err['field']})" if err.get("field") else ""
        message = f"{err.get('message', '')}{field}"
        if isinstance(body.get("files"), list):  # per-file reasons (a refused import)
            message += "".join(f"\n  {f.get('name')}: {f.get('code')}: {f.get('message')}"
                               for f in body["files"])
        return ApiError(message, code=err.get("code", ""), status=status, body=body)
    if isinstance(body, dict) and "detail" in body:
        return ApiError(str(body["detail"]), code="http_%d" % status, status=status, body=body)
    if isinstance(body, dict):
        parts = [f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in body.items()]
        return ApiError("; ".join(parts), code="invalid", status=status, body=body)
    return ApiError(f"HTTP {status}: {text[:300]}", code="http_%d" % status, status=status)
