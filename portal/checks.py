"""System checks: refuse to run in production (DEBUG off) on development defaults."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register()
def production_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    if settings.DEBUG:
        return []
    missing = list(settings.GENERATED_SETTINGS)
    if not settings.DATABASE_URL:
        missing.append("DATABASE_URL")
    if settings.CELERY_BROKER_URL.startswith(("pcfs://", "filesystem://")):
        missing.append("CELERY_BROKER_URL")
    if not settings.ALLOWED_HOSTS:
        missing.append("ALLOWED_HOSTS")
    return [
        Error(
            f"{name} must be set when DEBUG is off",
            hint=f"Set the environment variable {name} (or {name}_FILE for secrets); see README 'Configuration'.",
            id="paddlecloud.E001",
        )
        for name in missing
    ]
