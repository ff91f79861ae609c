"""Kubernetes probes: /healthz (the process answers) and /readyz (the database and the broker answer).

Both are answered by a middleware placed first in MIDDLEWARE, before anything calls
`request.get_host()`: the kubelet probes a pod by its IP (`Host: 10.244.0.7:8000`), which is not in
ALLOWED_HOSTS, so a view behind Django's host check would get 400 and the pod would never turn
ready. Answering these two fixed paths whatever the Host is safe: the answer builds no URL from the
Host and says nothing but "ok" or which dependency failed. Behind the portal's proxies
(PADDLECLOUD_TRUSTED_PROXIES), a request that came through them is not a probe and gets the
ordinary 404. They need no login, no session and no
CSRF token (GET and HEAD only), touch no cache and are never throttled: a probe must stay cheap.

The readiness answer names a failed dependency and the exception's class only: the message of a
database or broker error can carry a host name or, from some drivers, the URL with its password.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from kombu import Connection

from core.api.errors import body

logger = logging.getLogger(__name__)

View = Callable[[HttpRequest], HttpResponseBase]
LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"
# Seconds one broker check may take (connect and first round trip); the kubelet's probe timeout is longer.
BROKER_TIMEOUT = 2
OK = "ok"


def check_database() -> str:
    """Run `SELECT 1` on the default database; "ok" or what went wrong (the class only)."""
    connection = connections["default"]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not ready"; a probe never raises
        connection.close()  # the next probe opens a fresh connection
        return _failure("database", exc)
    return OK


def check_broker() -> str:
    """Connect to the Celery broker within BROKER_TIMEOUT seconds; "ok" or what went wrong."""
    options = {
        **settings.CELERY_BROKER_TRANSPORT_OPTIONS,
        # Redis: bound the TCP connect and every read, so a broker that accepts and never answers
        # cannot hold the probe (and a gunicorn thread) longer than BROKER_TIMEOUT.
        "socket_connect_timeout": BROKER_TIMEOUT,
        "socket_timeout": BROKER_TIMEOUT,
        "max_retries": 0,
    }
    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=BROKER_TIMEOUT, transport_options=options) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT)
    except Exception as exc:  # kombu raises transport-specific errors; every one means "not ready"
        return _failure("broker", exc)
    return OK


def _failure(what: str, exc: BaseException) -> str:
    # The message is left out on purpose (it may name a password); the class is enough to start from.
    logger.warning("readiness: %s unavailable (%s)", what, type(exc).__name__)
    return f"unavailable ({type(exc).__name__})"


def readiness() -> JsonResponse:
    started = time.monotonic()
    checks = {"database": check_database(), "broker": check_broker()}
    failed = [name for name, state in checks.items() if state != OK]
    if not failed:
        return JsonResponse(checks)
    errors: list[dict[str, str | None]] = [
        {"field": name, "code": "unavailable", "message": f"{name} {checks[name]}"} for name in failed
    ]
    answer = {**checks, **body(f"not ready: {', '.join(failed)}", "unavailable", errors)}
    logger.info("readiness: 503 after %.2f s", time.monotonic() - started)
    return JsonResponse(answer, status=503)


def _through_proxy(request: HttpRequest) -> bool:
    """Sent through the portal's proxies (the Ingress adds X-Forwarded-For; the kubelet probes the pod
    directly): the probes are the kubelet's, not the internet's. Each /readyz opens a database and a
    broker connection, so from outside they would be a cheap way to tie up the web threads."""
    return bool(settings.PADDLECLOUD_TRUSTED_PROXIES) and "HTTP_X_FORWARDED_FOR" in request.META


def probes(get_response: View) -> View:
    """Answer /healthz and /readyz before host checks, sessions and CSRF; pass everything else on."""

    def middleware(request: HttpRequest) -> HttpResponseBase:
        if request.path not in (LIVENESS_PATH, READINESS_PATH) or _through_proxy(request):
            return get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = JsonResponse(body("only GET and HEAD", "method_not_allowed"), status=405)
            response["Allow"] = "GET, HEAD"
            return response
        response = JsonResponse({"status": OK}) if request.path == LIVENESS_PATH else readiness()
        # The security middleware further in never sees these answers: the headers that matter here.
        response["Cache-Control"] = "no-store"
        response["X-Content-Type-Options"] = "nosniff"
        return response

    return middleware
