"""API tokens that expire: a leaked token stops working by itself after PKB_TOKEN_MAX_AGE_DAYS
(0: never). Revoking is deleting it (a new one at /accounts/), which DRF already honours."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token


def expires_at(token: Token) -> Any:
    days = settings.PKB_TOKEN_MAX_AGE_DAYS
    return token.created + timedelta(days=days) if days > 0 else None


def is_expired(token: Token) -> bool:
    end = expires_at(token)
    return end is not None and timezone.now() >= end


class ExpiringTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        user, token = super().authenticate_credentials(key)
        if is_expired(token):
            raise exceptions.AuthenticationFailed(
                f"Token expired on {expires_at(token):%Y-%m-%d}: get a new one at /accounts/ or "
                "with POST /api/v1/auth/token/ (username and password).")
        return user, token
