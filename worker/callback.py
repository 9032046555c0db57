"""POSTs to the portal with the job's secret token (stdlib only)."""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any

log = logging.getLogger(__name__)


class CallbackRejected(Exception):
    """The portal answered 4xx: retrying will not help (wrong token, already finished)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code

    @property
    def already_recorded(self) -> bool:
        """409: the submission already has its result (this one, posted before, or a peer's)."""
        return self.code == 409


class ServerError(ConnectionError):
    """The portal answered 500: it is up, and handling this body failed; sent again, the same body
    most likely fails the same way (an outage answers 503, a proxy 502 or 504)."""


def post(url: str, token: str, payload: dict[str, Any], *, retries: int = 5,
         timeout_s: float = 30.0) -> dict[str, Any]:
    body = json.dumps(payload).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Worker {token}"})
    delay = 1.0
    last = 0
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode(errors="replace")
            if 400 <= exc.code < 500 and exc.code != 429:
                raise CallbackRejected(f"{url}: HTTP {exc.code}: {detail}", exc.code) from None
            log.warning("portal answered %s to %s: %s", exc.code, url, detail)
            last = exc.code
        except (urllib.error.URLError, OSError) as exc:
            log.warning("could not reach %s: %s", url, exc)
            last = 0
        if attempt < retries:
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
    error = ServerError if last == 500 else ConnectionError
    raise error(f"gave up posting to {url} after {retries + 1} tries (last: {last or 'no answer'})")
