"""API tokens: stored hashed for lookup and encrypted for display, with expiry and revocation."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models
from django.utils import timezone

from core.crypto import EncryptedTextField


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def valid(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())


class ApiToken(models.Model):
    """A bearer token for paddlectl and the SDK.

    The key is looked up by its SHA-256 (so the database never answers a query with the key) and
    also kept encrypted, so the profile page can show it again as the original portal did.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key = EncryptedTextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "revoked_at", "expires_at"])]

    def __str__(self) -> str:
        return f"token of {self.user} created {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def is_valid(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()

    @property
    def prefix(self) -> str:
        return f"{self.key[:6]}…"


def issue_token(user: User) -> ApiToken:
    key = secrets.token_hex(20)  # 40 hex characters, the shape of DRF's tokens
    ttl = timedelta(days=settings.PADDLECLOUD_TOKEN_TTL_DAYS)
    return ApiToken.objects.create(user=user, key=key, key_hash=hash_key(key), expires_at=timezone.now() + ttl)
