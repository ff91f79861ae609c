"""Our middleware: the instance header `make run` waits for; NUL bytes refused; downloads let go of the database."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.db import connections
from django.http import HttpRequest, HttpResponseBase, JsonResponse

from core.api import errors

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


NUL_RULE = "may not contain null characters (NUL bytes)"


def refuse_nul_bytes(get_response: View) -> View:
    """A 400 for a NUL byte in the path or a query parameter, before any view: no name or value the portal keeps
    or looks up may hold one (PostgreSQL's text refuses it, which would surface as a 500 in whichever view asked
    first). Under /api/ the error shape names the parameter; pages answer Django's 400 page."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        field = "path" if "\x00" in request.path else None  # a name in the path is looked up as a query's is
        for name, values in request.GET.lists():
            if field is None and ("\x00" in name or any("\x00" in value for value in values)):
                field = name.replace("\x00", "\\0")[:40]
        if field is None:
            return get_response(request)
        if not errors.is_api(request):
            raise SuspiciousOperation(f"{field}: {NUL_RULE}")
        problem: dict[str, str | None] = {"field": field, "code": "invalid", "message": NUL_RULE}
        return JsonResponse(errors.body(NUL_RULE, "invalid", [problem]), status=400)

    return middleware


def streams_let_go_of_database(get_response: View) -> View:
    """A streaming response (a download) closes its database connections before its body is sent: a client that
    reads slowly must not hold one of the database's connections while it does (the gevent workers hold up to
    1,000 connections each; PostgreSQL allows 100 by default). Outermost, so no later middleware opens one
    again; a connection inside a transaction (a test's) is left alone. Django opens a new one when next asked."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response = get_response(request)
        if response.streaming:
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block:
                    connection.close()
        return response

    return middleware
