"""Admin for registry secrets: the password is write-only and masked."""

from __future__ import annotations

from django.contrib import admin

from core.secret_widgets import WriteOnlySecretField, WriteOnlySecretsForm
from registry.models import RegistrySecret


class RegistrySecretForm(WriteOnlySecretsForm):
    secret_fields = ("password",)
    required_secrets = ("password",)
    password = WriteOnlySecretField(help_text="Stored encrypted; never shown again.")

    class Meta:
        model = RegistrySecret
        fields = ["owner", "name", "server", "username", "password"]


@admin.register(RegistrySecret)
class RegistrySecretAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = RegistrySecretForm
    list_display = ["name", "owner", "server", "username", "password_masked", "updated_at"]
    list_filter = ["server"]
    search_fields = ["name", "owner__username", "server", "username"]
    autocomplete_fields = ["owner"]

    @admin.display(description="password")
    def password_masked(self, secret: RegistrySecret) -> str:
        return "••••••••"
