"""System checks: refuse to run in production (DEBUG off) on development defaults, or on unsafe secrets."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

from portal.accounts.throttle import parse_rate


def _missing_production_settings() -> list[str]:
    missing = list(settings.GENERATED_SECRET_FILES)
    if not settings.DATABASE_URL:
        missing.append("DATABASE_URL")
    if settings.CELERY_BROKER_URL.startswith(("pcfs://", "filesystem://")):
        missing.append("CELERY_BROKER_URL")
    if not settings.ALLOWED_HOSTS:
        missing.append("ALLOWED_HOSTS")
    return missing


@register()
def production_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    if settings.DEBUG:
        return []
    if settings.PADDLECLOUD_EMBEDDED:
        # One host, reached only on loopback: generated secrets (0600, checked below), SQLite and
        # the filesystem broker are honest there. Anything reachable must be configured for real.
        others = [host for host in settings.ALLOWED_HOSTS if host not in settings.LOOPBACK_HOSTS]
        return [
            Error(
                f"PADDLECLOUD_EMBEDDED serves loopback only, but ALLOWED_HOSTS has {', '.join(others)}",
                hint="Unset PADDLECLOUD_EMBEDDED and set the production settings (README 'Configuration').",
                id="paddlecloud.E002",
            )
        ] if others else []  # fmt: skip
    return [
        Error(
            f"{name} must be set when DEBUG is off",
            hint=f"Set the environment variable {name} (or {name}_FILE for secrets); see README 'Configuration'.",
            id="paddlecloud.E001",
        )
        for name in _missing_production_settings()
    ]


@register()
def generated_secrets_are_private(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = []
    for name, path in settings.GENERATED_SECRET_FILES.items():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            errors.append(Error(
                f"{name} is generated into {path}, which other users can read (mode {mode:o})",
                hint=f"chmod 600 {path}",
                id="paddlecloud.E003",
            ))  # fmt: skip
    return errors


@register()
def login_rate(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = []
    for name in ("PADDLECLOUD_LOGIN_RATE", "PADDLECLOUD_LOGIN_USER_RATE", "PADDLECLOUD_LOGIN_ADDRESS_RATE"):
        try:
            parse_rate(getattr(settings, name))
        except ValueError as exc:
            errors.append(Error(f"{name}: {exc}", hint="e.g. 10/min", id="paddlecloud.E004"))
    return errors
