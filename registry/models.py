"""RegistrySecret: a user's credentials for one container registry, password encrypted at rest."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from core.crypto import EncryptedTextField
from core.validators import validate_dns_label

# host[:port][/path], optionally with a scheme; what `docker login` accepts.
_SERVER = re.compile(
    r"^(https?://)?(?P<host>[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)"
    r"(:(?P<port>[0-9]{1,5}))?(/[A-Za-z0-9._/-]*)?$"
)


def validate_server(value: str) -> None:
    if not value or not value.strip():
        raise ValidationError("must not be empty", code="required")
    match = _SERVER.match(value.strip())
    if not match or (match.group("port") and not 0 < int(match.group("port")) < 65536):
        raise ValidationError(
            f"{value!r} is not a registry address; use host[:port], e.g. registry.example.com:5000",
            code="invalid",
        )


def validate_secret_name(value: str) -> None:
    validate_dns_label(value, max_length=63)


class RegistrySecret(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="registry_secrets")
    name = models.CharField(max_length=63, validators=[validate_secret_name])
    server = models.CharField(max_length=255, validators=[validate_server])
    username = models.CharField(max_length=255)
    password = EncryptedTextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="registry_name_unique_per_owner")]
        ordering = ["owner__username", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.server}) of {self.owner}"

    def __repr__(self) -> str:
        # Never let the password reach a log line through repr().
        return f"<RegistrySecret {self.pk} {self.name!r} owner={self.owner_id}>"
