"""The project-level app: system checks and operator commands (bootstrap, key rotation)."""

from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "PaddleCloud"

    def ready(self) -> None:
        # In ready(), not at the top: the checks import models, which need Django's app registry ready.
        from portal import checks  # noqa: F401, PLC0415  (registers the checks)
