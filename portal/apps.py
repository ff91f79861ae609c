"""The project-level app: system checks and operator commands (bootstrap, key rotation)."""

from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "PaddleCloud"

    def ready(self) -> None:
        from portal import checks  # noqa: F401  (registers the checks)
