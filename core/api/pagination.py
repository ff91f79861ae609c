"""Pagination for every API list: ?page=N (from 1) &page_size=M (1 to 500); anything else is a 400 naming it."""

from __future__ import annotations

from typing import Any

from django.core.paginator import InvalidPage
from rest_framework import exceptions, serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from core.paging import NearerEndPaginator

MAX_PAGE_SIZE = 500
MAX_PAGE = 10**9


class PageQuery(serializers.Serializer):  # type: ignore[type-arg]
    """The one rule for ?page and ?page_size; list query serializers inherit it, the paginator applies it."""

    page = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_PAGE,
        help_text="Page number, from 1.",
        error_messages={
            "invalid": "must be a whole number from 1",
            "min_value": "must be a whole number from 1",
            "max_value": f"must be a whole number from 1 to {MAX_PAGE}",
            "max_string_length": "must be a whole number from 1",
        },
    )
    page_size = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_PAGE_SIZE,
        help_text=f"Items per page, 1 to {MAX_PAGE_SIZE}.",
        error_messages={
            name: f"must be a whole number from 1 to {MAX_PAGE_SIZE}"
            for name in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )


def page_query(request: Request) -> dict[str, int]:
    """The validated ?page and ?page_size of a request (400 naming the parameter)."""
    raw = {name: request.query_params[name] for name in ("page", "page_size") if name in request.query_params}
    query = PageQuery(data=raw)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class Pagination(PageNumberPagination):
    django_paginator_class = NearerEndPaginator  # the last pages cost what the first do
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
    last_page_strings = ()  # `page` is a number; "last" would be a second rule

    def get_page_size(self, request: Request) -> int | None:
        return page_query(request).get("page_size", self.page_size)

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any] | None:
        number = page_query(request).get("page", 1)
        page_size = self.get_page_size(request)
        if not page_size:
            return None
        paginator = self.django_paginator_class(queryset, page_size)
        try:
            self.page = paginator.page(number)
        except InvalidPage:
            pages = paginator.num_pages
            raise exceptions.NotFound({"page": [f"page {number} does not exist; there are {pages} page(s)"]}) from None
        self.request = request
        return list(self.page)
