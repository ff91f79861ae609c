"""OpenAPI generation: every operation documents its error responses with the one `Error` schema.

The rule for which statuses an operation can answer lives here, once, instead of in a decorator on
every view (core/api/errors.py is the shape they all share).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny

ERROR = inline_serializer(
    "Error",
    {
        "detail": serializers.CharField(help_text="One line summing up every problem."),
        "code": serializers.CharField(help_text="not_authenticated, invalid, not_found, conflict, throttled, ..."),
        "errors": inline_serializer(
            "ErrorItem",
            {
                "field": serializers.CharField(allow_null=True, help_text="The field or parameter; null: the request."),
                "code": serializers.CharField(help_text="The rule broken, e.g. required, invalid, max_length."),
                "message": serializers.CharField(help_text="What is wrong and what to send instead."),
            },
            many=True,
        ),
    },
)

DESCRIPTIONS = {
    "400": "Bad input: each error names its field or parameter and the rule broken.",
    "401": "No credentials, or credentials that are wrong or expired.",
    "403": "Authenticated, but not allowed to do this.",
    "404": "No such object (another user's objects are not found either).",
    "409": "Conflicts with an existing object or the object's state.",
    "413": "The request body is larger than the portal accepts.",
    "415": "The request body's Content-Type is not one this operation accepts.",
    "429": "Too many attempts; retry after the time in Retry-After.",
}

_BODY_METHODS = {"POST", "PUT", "PATCH"}


class ErrorDocumentingSchema(AutoSchema):
    """drf-spectacular's AutoSchema plus the error responses each operation can give."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code in self.error_statuses():
            if code not in responses:
                response = self._get_response_for_code(ERROR, code, direction=direction)  # type: ignore[no-untyped-call]
                response["description"] = DESCRIPTIONS[code]
                responses[code] = response
        return responses

    def error_statuses(self) -> list[str]:
        """The error statuses this operation can answer, from what the view declares."""
        public = all(isinstance(permission, AllowAny) for permission in self.view.get_permissions())
        codes = []
        # Any input (parameters, a body, a page number, the credentials) can be bad; a public GET with
        # none cannot.
        if self.method != "GET" or self._get_parameters() or self._is_list_view():
            codes.append("400")
        if not public:
            codes += ["401", "403", "404"]
        elif self.method in _BODY_METHODS:
            # The login calls: public, yet a wrong password or an inactive account, and throttled by
            # accounts.throttle (not a DRF throttle class, so get_throttles() does not show it).
            codes += ["401", "403", "429"]
        if not public and self.method != "GET":
            codes.append("409")
        if self.method in _BODY_METHODS:
            codes += ["413", "415"]
        # `held_per_user`: a view bounded per user by the portal itself (core/streams.py's downloads).
        if (self.view.get_throttles() or getattr(self.view, "held_per_user", False)) and "429" not in codes:
            codes.append("429")
        return codes


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Documents the API token (accounts.authentication) as the security scheme of the API."""

    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`: from POST /api/v1/auth/token, `paddlectl login` or the profile page.",
        }
