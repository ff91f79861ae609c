"""Storage: the PFS (per-user homes, read-only public data), quotas and chunked uploads."""

from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = "PFS storage"

    def ready(self) -> None:
        from portal.datacenters.quota import register_usage_provider
        from storage.usage import usage_provider

        register_usage_provider(usage_provider)
