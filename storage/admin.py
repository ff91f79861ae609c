"""Operators see storage usage and uploads in progress (read-only: usage is recomputed, not typed)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from paddlecloud.contract.units import human_bytes

from storage.models import StorageUsage, Upload


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(StorageUsage)
class StorageUsageAdmin(ReadOnlyAdmin):
    list_display = ["user", "datacenter", "used", "used_files", "reserved", "reserved_files", "recomputed_at"]
    list_filter = ["datacenter"]
    search_fields = ["user__username"]

    @admin.display(ordering="used_bytes")
    def used(self, obj: StorageUsage) -> str:
        return human_bytes(obj.used_bytes)

    @admin.display(ordering="reserved_bytes")
    def reserved(self, obj: StorageUsage) -> str:
        return human_bytes(obj.reserved_bytes)


@admin.register(Upload)
class UploadAdmin(ReadOnlyAdmin):
    list_display = ["path", "owner", "datacenter", "state", "upload_size", "created_at", "updated_at"]
    list_filter = ["state", "datacenter"]
    search_fields = ["path", "owner__username"]

    @admin.display(ordering="size", description="size")
    def upload_size(self, obj: Upload) -> str:
        return human_bytes(obj.size)
