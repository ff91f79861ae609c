"""Middleware of our own: the per-start instance header that `make run` waits for."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

View = Callable[[HttpRequest], HttpResponseBase]


def instance_header(get_response: View) -> View:
    """Send X-PaddleCloud-Instance when PADDLECLOUD_INSTANCE is set (scripts/common.sh wait_for_portal)."""
    instance = settings.PADDLECLOUD_INSTANCE

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        if instance:
            response["X-PaddleCloud-Instance"] = instance
        return response

    return middleware
