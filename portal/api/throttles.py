"""Per-user throttles whose rates are read from settings at request time (tests change them)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class _FromSettings:
    scope: str

    def get_rate(self) -> str | None:
        return settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"].get(self.scope)


class AnonThrottle(_FromSettings, AnonRateThrottle):
    scope = "anon"


class UserThrottle(_FromSettings, UserRateThrottle):
    scope = "user"


class SubmitThrottle(_FromSettings, UserRateThrottle):
    """Bursts of uploads; the daily cap (a service rule) bounds the total."""

    scope = "submit"


class LoginThrottle(_FromSettings, AnonRateThrottle):
    """Password guesses at auth/token/, counted per client address whoever they claim to be
    (DRF's own token view has no throttle at all)."""

    scope = "login"


class SignupThrottle(_FromSettings, AnonRateThrottle):
    """New accounts per client address: every limit on uploads is per user, so accounts made
    without limit would multiply them."""

    scope = "signup"


_PER = {1: "a second", 60: "a minute", 3600: "an hour", 86400: "a day"}
_WHO = {"anon": "A client without a token may make {n} request{s} {per} (counted per address)",
        "user": "A user may make {n} request{s} {per}",
        "submit": "A user may upload {n} time{s} {per}",
        "login": "An address may try {n} password{s} {per}",
        "signup": "An address may make {n} account{s} {per}"}


def _rate(throttle: Any) -> str | None:
    rate = throttle.get_rate()
    if not rate:
        return None
    n, seconds = throttle.parse_rate(rate)
    return _WHO.get(throttle.scope, "The limit is {n} request{s} {per}").format(
        n=n, s="" if n == 1 else "s", per=_PER.get(seconds, f"every {seconds} s"))


def refusal(refused: list[Any]) -> str:
    """What a 429 says (DRF's Throttled adds "Expected available in N seconds."): which limit was
    reached, and for a client without a token that a token's user has a higher one. DRF's own
    "Request was throttled." said neither."""
    said = [r for r in (_rate(t) for t in refused) if r]
    user = UserThrottle().get_rate()
    if user and any(isinstance(t, AnonThrottle) for t in refused):
        n, seconds = UserThrottle().parse_rate(user)
        said.append(f"with a token (`pkb login`, or POST /api/v1/auth/token/ and then "
                    f"Authorization: Token <key>) you may make {n} requests "
                    f"{_PER.get(seconds, f'every {seconds} s')}")
    return "Too many requests. " + "; ".join(said) + ("." if said else "")


class NamedThrottles:
    """DRF's ``check_throttles``, with a 429 that names the limit reached (``refusal``): every
    API view, the token view included."""

    def check_throttles(self, request: Any) -> None:
        refused = [t for t in self.get_throttles() if not t.allow_request(request, self)]  # type: ignore[attr-defined]
        if refused:
            waits = [w for w in (t.wait() for t in refused) if w is not None]
            raise exceptions.Throttled(max(waits, default=None), detail=refusal(refused))
