"""Storage: the PFS (per-user homes, read-only public data), quotas and chunked uploads."""

from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = "PFS storage"

    def ready(self) -> None:
        # In ready(), not at the top: these import models, which Django allows only once its app registry is ready.
        from datacenters.quota import register_usage_provider  # noqa: PLC0415
        from storage.usage import usage_provider  # noqa: PLC0415

        register_usage_provider(usage_provider)
