"""Admin for API tokens: list and revoke; the key itself is never shown."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "created_at", "expires_at", "last_used_at", "revoked_at", "valid"]
    list_filter = ["revoked_at", "expires_at"]
    search_fields = ["user__username", "user__email"]
    fields = ["user", "created_at", "expires_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "created_at", "last_used_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are issued by logging in, so the key reaches only its owner

    @admin.display(boolean=True)
    def valid(self, token: ApiToken) -> bool:
        return token.is_valid

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
