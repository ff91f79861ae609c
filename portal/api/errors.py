"""One JSON error shape for the whole API: every problem names its field and the rule broken.

{"detail": "summary", "code": "invalid", "errors": [{"field": "name", "code": "...", "message": "..."}]}
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "conflicts with an existing object"
    default_code = "conflict"


log = logging.getLogger(__name__)


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


def _summary(errors: list[dict[str, str | None]]) -> str:
    parts = [f"{e['field']}: {e['message']}" if e["field"] else str(e["message"]) for e in errors]
    return "; ".join(parts)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "not found")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)

    response = drf_exception_handler(exc, context)
    if response is None:
        # An unexpected error: log it for operators, answer JSON without a traceback.
        log.exception("unhandled API error in %s", context.get("view"))
        return Response(
            {
                "detail": "internal error; the operators have the details in the portal log",
                "code": "error",
                "errors": [],
            },
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )

    assert isinstance(exc, exceptions.APIException)
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        response.data = {"detail": _summary(errors), "code": "invalid", "errors": errors}
    else:
        detail = exc.detail
        errors = _flatten(detail) if isinstance(detail, (dict, list)) else []
        message = _summary(errors) if errors else str(detail)
        code = exc.get_codes()
        response.data = {
            "detail": message,
            "code": code if isinstance(code, str) else exc.default_code,
            "errors": errors,
        }
    return response
