"""Middleware of our own: the per-start instance header that `make run` waits for; NUL bytes refused."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
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


class NulByte(SuspiciousOperation):
    """A query parameter (name or value) holds a NUL byte."""


def refuse_nul_bytes(get_response: View) -> View:
    """A 400 for a NUL byte in the path or a query parameter, before any view: no name or value the portal keeps
    or looks up may hold one (PostgreSQL's text refuses it, which would surface as a 500 in whichever view asked
    first). Django answers the SuspiciousOperation with core.api.errors.bad_request: the error shape under /api/."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        if "\x00" in request.path:  # a name in the path (a job, a datacenter) is looked up as the query's are
            raise NulByte("the path holds a NUL byte")
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                shown = name.replace("\x00", "\\0")[:40]
                raise NulByte(f"query parameter {shown!r} holds a NUL byte")
        return get_response(request)

    return middleware
