"""Admin for image builds: operators see every build, its state, message and archived log."""

from __future__ import annotations

from django.contrib import admin

from images.models import ImageBuild


@admin.register(ImageBuild)
class ImageBuildAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["uid", "owner", "datacenter", "image", "state", "created_at", "finished_at"]
    list_filter = ["state", "datacenter"]
    search_fields = ["uid", "owner__username", "image"]
    readonly_fields = [f.name for f in ImageBuild._meta.get_fields() if getattr(f, "concrete", False)]

    def has_add_permission(self, request: object) -> bool:
        return False  # builds are requested through the API, where every rule is checked
