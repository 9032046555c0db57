"""What every API view shares: authentication, permissions, throttles, pagination."""

from __future__ import annotations

from typing import Any

from rest_framework import generics, permissions
from rest_framework.authentication import SessionAuthentication
from rest_framework.views import APIView

from .pagination import Pagination
from .throttles import AnonThrottle, UserThrottle
from .tokens import ExpiringTokenAuthentication


class APIBase:
    authentication_classes: list[Any] = [ExpiringTokenAuthentication, SessionAuthentication]
    permission_classes: list[Any] = [permissions.IsAuthenticatedOrReadOnly]
    throttle_classes: list[Any] = [AnonThrottle, UserThrottle]
    pagination_class = Pagination


class BaseView(APIBase, APIView):
    pass


class BaseListView(APIBase, generics.ListAPIView):
    pass


class BaseRetrieveView(APIBase, generics.RetrieveAPIView):
    pass
