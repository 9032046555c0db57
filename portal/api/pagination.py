from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination

from .errors import ApiError


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> list[Any] | None:
        """DRF's refusal of a page read "Invalid page.": this one says why and which pages exist."""
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound:
            size = self.get_page_size(request) or self.page_size
            paginator = self.django_paginator_class(queryset, size)
            pages, count = paginator.num_pages, paginator.count
            asked = request.query_params.get(self.page_query_param, "")
            if asked.isdigit():
                message = (f"There is no page {asked}: {count} result{'s' if count != 1 else ''} "
                           f"make{'s' if count == 1 else ''} {pages} page{'s' if pages != 1 else ''}"
                           f" of {size} (page=1 to {pages}, or page=last); follow `next` from "
                           "the first page.")
            else:
                message = (f"page {asked!r} is not a page number: a whole number from 1 to "
                           f"{pages}, or page=last.")
            raise ApiError("not_found", message, field=self.page_query_param,
                           status_code=status.HTTP_404_NOT_FOUND) from None
