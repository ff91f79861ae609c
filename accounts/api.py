"""Token API: log in with username and password, get a token; revoke it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate, get_user_model
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import throttle
from accounts.models import ApiToken
from accounts.services import current_token, revoke_token
from core.api.serializers import StrictSerializer


class LoginSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class InactiveAccount(exceptions.PermissionDenied):
    default_code = "inactive"


class BadCredentials(exceptions.APIException):
    # Not AuthenticationFailed: DRF turns that into 403 on views without authenticators.
    status_code = status.HTTP_401_UNAUTHORIZED
    default_code = "authentication_failed"


def _login(request: Request) -> ApiToken:
    serializer = LoginSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    username = serializer.validated_data["username"]
    password = serializer.validated_data["password"]
    wait = throttle.begin(request._request, username)
    if wait is not None:
        raise exceptions.Throttled(wait, detail=throttle.REASON)  # DRF adds the wait
    user = authenticate(request._request, username=username, password=password)
    if user is None:
        # Tell an inactive account (awaiting approval) apart from a wrong password, but only
        # once the password is right, so the answer reveals nothing to a guesser.
        candidate = get_user_model().objects.filter(username=username, is_active=False).first()
        if candidate is not None and candidate.check_password(password):
            raise InactiveAccount("account is not active yet; an operator must approve it")
        raise BadCredentials("username or password is incorrect")
    throttle.succeeded(request._request, username)
    return current_token(user)


_TOKEN_RESPONSE = inline_serializer(
    "Token",
    {"token": serializers.CharField(), "expires_at": serializers.DateTimeField(), "username": serializers.CharField()},
)


class LegacyTokenView(APIView):
    """POST /api-token-auth/ as the original paddlectl calls it: answers {"token": ...}."""

    permission_classes = [AllowAny]
    authentication_classes: list[Any] = []

    @extend_schema(
        request=LoginSerializer, responses=inline_serializer("LegacyToken", {"token": serializers.CharField()})
    )
    def post(self, request: Request) -> Response:
        return Response({"token": _login(request).key})


class TokenView(APIView):
    """POST: log in and get the token with its expiry; DELETE: revoke the token you call with."""

    def get_permissions(self) -> list[Any]:
        return [AllowAny()] if self.request.method == "POST" else [IsAuthenticated()]

    def get_authenticators(self) -> list[Any]:
        # No session/CSRF dance for the login call itself.
        return [] if self.request is not None and self.request.method == "POST" else super().get_authenticators()

    @extend_schema(request=LoginSerializer, responses=_TOKEN_RESPONSE)
    def post(self, request: Request) -> Response:
        token = _login(request)
        return Response({"token": token.key, "expires_at": token.expires_at, "username": token.user.get_username()})

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request) -> Response:
        if not isinstance(request.auth, ApiToken):
            raise exceptions.ValidationError({"Authorization": ["call with the token to revoke: 'Token <key>'"]})
        revoke_token(request.auth)
        return Response(status=status.HTTP_204_NO_CONTENT)
