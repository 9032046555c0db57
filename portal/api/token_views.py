"""POST /api/v1/auth/token/: a view apart from the authentication class, which the settings
import before DRF's views exist."""

from __future__ import annotations

from typing import Any

from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request
from rest_framework.response import Response

from .throttles import LoginThrottle, NamedThrottles
from .tokens import is_expired


class ObtainToken(NamedThrottles, ObtainAuthToken):
    """Username and password for a token; an expired token is replaced, not handed back."""

    throttle_classes = (LoginThrottle,)

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = self.serializer_class(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        user = form.validated_data["user"]
        token = Token.objects.filter(user=user).first()
        if token is not None and is_expired(token):
            token.delete()
            token = None
        token = token or Token.objects.create(user=user)
        return Response({"token": token.key})
