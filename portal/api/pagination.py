"""Pagination for every API list: ?page=N&page_size=M (max 500)."""

from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500
