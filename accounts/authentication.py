"""DRF authentication by API token (`Authorization: Token <key>` as paddlectl sends, or Bearer)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from accounts.models import ApiToken, hash_key

# Recording every use would write on every request; a minute of precision is plenty.
_LAST_USED_PRECISION = timedelta(minutes=1)


class ApiTokenAuthentication(BaseAuthentication):
    keywords = (b"token", b"bearer")

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in self.keywords:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'")
        try:
            key = parts[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("token contains invalid characters") from None
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(key)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("invalid token; log in again to get a new one")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("token was revoked; log in again to get a new one")
        now = timezone.now()
        if token.expires_at <= now:
            raise exceptions.AuthenticationFailed("token expired; log in again to get a new one")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("user account is inactive")
        if token.last_used_at is None or now - token.last_used_at > _LAST_USED_PRECISION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Token"
