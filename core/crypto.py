"""Encryption at rest for secrets (Fernet/MultiFernet, so keys can be rotated)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models


@lru_cache(maxsize=1)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def fernet() -> MultiFernet:
    return _fernet(tuple(settings.PADDLECLOUD_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    return fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(
            "a stored secret cannot be decrypted with any key in PADDLECLOUD_ENCRYPTION_KEY "
            "(was a key removed before `manage.py rotate_encryption_key` ran?)"
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt a stored token with the newest key."""
    return fernet().rotate(token.encode()).decode()


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]
    """A text column holding a Fernet token; Python code sees only the plaintext."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return decrypt(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return encrypt(str(value))


def encrypted_fields(model: type[models.Model]) -> list[str]:
    return [f.name for f in model._meta.get_fields() if isinstance(f, EncryptedTextField)]
