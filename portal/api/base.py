"""What every API view shares: authentication, permissions, throttles, pagination."""

from __future__ import annotations

from typing import Any

from rest_framework import generics, permissions
from rest_framework.authentication import SessionAuthentication
from rest_framework.views import APIView

from .errors import ApiError
from .pagination import Pagination
from .throttles import AnonThrottle, NamedThrottles, UserThrottle
from .tokens import ExpiringTokenAuthentication


class APIBase(NamedThrottles):
    authentication_classes: list[Any] = [ExpiringTokenAuthentication, SessionAuthentication]
    permission_classes: list[Any] = [permissions.IsAuthenticatedOrReadOnly]
    throttle_classes: list[Any] = [AnonThrottle, UserThrottle]
    pagination_class = Pagination

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        # PostgreSQL text cannot hold a NUL byte: a query parameter with one (the API fuzz test
        # sent `models=\x00`) would fail deep in a query as a server error.
        for key, values in request.query_params.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                raise ApiError("bad_parameter", f"Query parameter {key.replace(chr(0), '')!r} contains a NUL "
                               "(0x00) character; send text without it.", field=key.replace("\x00", ""))
        super().initial(request, *args, **kwargs)  # type: ignore[misc]


class BaseView(APIBase, APIView):
    pass


class BaseListView(APIBase, generics.ListAPIView):
    pass


class BaseRetrieveView(APIBase, generics.RetrieveAPIView):
    pass
