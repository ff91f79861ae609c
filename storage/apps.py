"""Storage: the PFS (per-user homes, read-only public data), quotas and chunked uploads."""

from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = "PFS storage"
