"""Admin for worker heartbeats (read-only)."""

from django.contrib import admin
from django.http import HttpRequest

from health.models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["hostname", "last_seen", "beats"]
    readonly_fields = ["hostname", "last_seen", "beats"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
