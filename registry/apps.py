"""Registry secrets: users' private container registry credentials for pulling job images."""

from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    label = "registry"
    verbose_name = "Registry secrets"
