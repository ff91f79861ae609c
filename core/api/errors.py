"""One JSON error shape for the whole API: every problem names its field and the rule broken.

{"detail": "summary", "code": "invalid", "errors": [{"field": "name", "code": "...", "message": "..."}]}

Every body is bounded whatever the input (at most MAX_ERRORS entries of MAX_MESSAGE characters and a
MAX_DETAIL summary: a few KB); messages quote user values through `quote`, which keeps a short prefix.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from paddlecloud.contract.quantity import quote as quote  # re-exported: the API modules quote user values with it
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core import errors as domain

# The status each domain error means; a subclass takes its nearest listed ancestor's.
STATUS: dict[type[domain.DomainError], int] = {
    domain.Invalid: status.HTTP_400_BAD_REQUEST,
    domain.Forbidden: status.HTTP_403_FORBIDDEN,
    domain.NotFound: status.HTTP_404_NOT_FOUND,
    domain.Conflict: status.HTTP_409_CONFLICT,
    domain.LengthRequired: status.HTTP_411_LENGTH_REQUIRED,
    domain.TooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    domain.Unavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
    domain.InsufficientStorage: status.HTTP_507_INSUFFICIENT_STORAGE,
}


def status_of(error: domain.DomainError) -> int:
    for kind in type(error).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return status.HTTP_400_BAD_REQUEST


def domain_body(error: domain.DomainError) -> dict[str, Any]:
    """A domain error in the one shape: its messages listed under its field when it names one."""
    errors: list[dict[str, str | None]] = [
        {"field": error.field, "code": error.code, "message": message} for message in error.messages
    ]
    return body(error.message, error.code, errors if error.field else None)


class TooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is too large"
    default_code = "too_large"


log = logging.getLogger(__name__)

INTERNAL = "internal error; the operators have the details in the portal log"
MAX_MESSAGE = 300  # characters of one message
MAX_FIELD = 100  # characters of one field name (field names can come from the user's JSON keys)
MAX_ERRORS = 10  # entries in `errors`; the rest are counted in `detail`
MAX_DETAIL = 1000  # characters of the summary


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 20]}... [{len(text) - limit + 20} more]"


def _flatten(detail: Any, prefix: str = "") -> list[dict[str, str | None]]:
    """Turn DRF's nested error dict/list into a flat list of {field, code, message}."""
    errors: list[dict[str, str | None]] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if key not in ("non_field_errors", "__all__") else ""
            errors.extend(_flatten(value, f"{prefix}.{name}" if prefix and name else (name or prefix)))
    elif isinstance(detail, list):
        for index, value in enumerate(detail):
            nested = isinstance(value, (dict, list))
            errors.extend(_flatten(value, f"{prefix}[{index}]" if nested else prefix))
    else:
        code = getattr(detail, "code", None) or "invalid"
        errors.append({"field": prefix or None, "code": str(code), "message": str(detail)})
    return errors


def _bounded(errors: list[dict[str, str | None]]) -> list[dict[str, str | None]]:
    kept = []
    for error in errors[:MAX_ERRORS]:
        field = error["field"]
        kept.append(
            {
                "field": _cut(field, MAX_FIELD) if field else field,
                "code": _cut(str(error["code"]), MAX_FIELD),
                "message": _cut(str(error["message"]), MAX_MESSAGE),
            }
        )
    return kept


def _summary(errors: list[dict[str, str | None]], total: int) -> str:
    parts = [f"{e['field']}: {e['message']}" if e["field"] else str(e["message"]) for e in errors]
    if total > len(errors):
        parts.append(f"and {total - len(errors)} more error(s)")
    return _cut("; ".join(parts), MAX_DETAIL)


def body(detail: str, code: str, errors: list[dict[str, str | None]] | None = None) -> dict[str, Any]:
    """The error shape, bounded: what every API error answers."""
    found = errors or []
    kept = _bounded(found)
    return {
        "detail": _summary(kept, len(found)) if kept else _cut(detail, MAX_DETAIL),
        "code": _cut(code, MAX_FIELD),
        "errors": kept,
    }


def too_large() -> TooLarge:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return TooLarge(f"the request body is larger than the limit of {limit} bytes for API requests")


def _django_to_api(exc: Exception) -> Exception:
    """Django's own exceptions as the API errors that mean the same."""
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, Http404):
        return exceptions.NotFound(str(exc) or "not found")
    if isinstance(exc, PermissionDenied):
        return exceptions.PermissionDenied(str(exc) or None)
    if isinstance(exc, RequestDataTooBig):
        return too_large()
    if isinstance(exc, SuspiciousOperation):  # too many fields, a malformed header, ...
        return exceptions.ParseError(f"the request was refused: {exc}")
    return exc


DATABASE_DOWN = "the database is unavailable right now; nothing was changed, try again in a few seconds"
RETRY_AFTER_SECONDS = 5  # the Retry-After of a 503 for a database outage


def database_unavailable(exc: BaseException | None) -> bool:
    """The database could not be reached or used (refused, restarting, closed connection, locked): a 503."""
    return isinstance(exc, (OperationalError, InterfaceError))


def _database_down(request: HttpRequest | None) -> dict[str, Any]:
    log.warning("database unavailable for %s", request.path if request is not None else "a request", exc_info=True)
    return body(DATABASE_DOWN, "database_unavailable")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, domain.DomainError):
        return Response(domain_body(exc), status=status_of(exc))
    if database_unavailable(exc):
        return Response(
            _database_down(context.get("request")),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    exc = _django_to_api(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        # An unexpected error: log it for operators, answer JSON without a traceback.
        log.exception("unhandled API error in %s", context.get("view"))
        return Response(
            body(INTERNAL, "error"),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )

    assert isinstance(exc, exceptions.APIException)
    if isinstance(exc, exceptions.ValidationError):
        response.data = body("", "invalid", _flatten(exc.detail))
    else:
        detail = exc.detail
        errors = _flatten(detail) if isinstance(detail, (dict, list)) else []
        code = exc.get_codes()
        response.data = body(str(detail), code if isinstance(code, str) else exc.default_code, errors)
    return response


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") or request.path == "/api"


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 (a suspicious request met before any view): JSON under /api/, its page elsewhere."""
    if is_api(request):
        error = _django_to_api(exception)
        if isinstance(error, exceptions.APIException):
            return JsonResponse(body(str(error.detail), str(error.default_code)), status=error.status_code)
        return JsonResponse(body("bad request", "invalid"), status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 (no route matched): JSON under /api/, its page elsewhere."""
    if is_api(request):
        message = f"no API route {quote(request.path, 100)}; the routes are listed at /api/schema/"
        return JsonResponse(body(message, "not_found"), status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500 outside DRF's handler: JSON under /api/ (never a traceback), its page elsewhere.

    A database outage is a 503 with Retry-After instead (Django calls this inside its except block).
    """
    if database_unavailable(sys.exc_info()[1]):
        down = _database_down(request)
        response: HttpResponse
        if is_api(request):
            response = JsonResponse(down, status=503)
        else:
            response = HttpResponse(down["detail"], status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if is_api(request):
        return JsonResponse(body(INTERNAL, "error"), status=500)
    return defaults.server_error(request)
