"""Per-user throttles whose rates are read from settings at request time (tests change them)."""

from __future__ import annotations

from django.conf import settings
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
