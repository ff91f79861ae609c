"""Admin for API tokens (list and revoke; the key itself is never shown) and users (approve, deactivate)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import deactivate


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


class PendingApproval(admin.SimpleListFilter):
    """Accounts that asked to join (PADDLECLOUD_SIGNUP=approval) and were never active: inactive, never logged in."""

    title = "approval"
    parameter_name = "approval"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("pending", "Waiting for approval")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> QuerySet[User]:
        if self.value() == "pending":
            return queryset.filter(is_active=False, last_login__isnull=True)
        return queryset


admin.site.unregister(User)


@admin.register(User)
class PortalUserAdmin(UserAdmin):  # type: ignore[type-arg]
    """Django's user admin with what an operator of a shared portal does most: approve signups, deactivate."""

    list_display = ["username", "email", "is_active", "is_staff", "date_joined", "last_login"]
    list_filter = [PendingApproval, "is_active", "is_staff", "is_superuser", "groups"]
    ordering = ["-date_joined"]
    actions = ["approve", "deactivate"]

    @admin.action(description="Approve (activate) selected accounts")
    def approve(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        count = queryset.filter(is_active=False).update(is_active=True)
        self.message_user(request, f"Activated {count} account(s); they can log in now.", messages.SUCCESS)

    @admin.action(description="Deactivate selected accounts (log them out, revoke their API tokens)")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        me = request.user.pk or 0  # the admin is for logged-in staff: always set
        others = queryset.exclude(pk=me)  # an operator never locks themselves out by a tick too many
        users = list(others.filter(is_active=True))
        for user in users:
            deactivate(user)
        skipped = " (not you)" if queryset.filter(pk=me).exists() else ""
        self.message_user(request, f"Deactivated {len(users)} account(s){skipped}. Their jobs go on; kill them "
                          "from the jobs admin if they must stop.", messages.SUCCESS)  # fmt: skip
