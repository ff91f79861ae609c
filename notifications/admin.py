"""Operators see each user's notification default and every delivery with its state and error."""

from django.contrib import admin

from notifications.models import Delivery, NotifyPreference


@admin.register(NotifyPreference)
class NotifyPreferenceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("user", "email", "webhook", "updated_at")
    search_fields = ("user__username",)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("job", "channel", "state", "attempts", "sent_at", "error")
    list_filter = ("channel", "state")
    readonly_fields = (
        "job", "channel", "target", "state", "attempts", "claimed_until", "error", "created_at", "sent_at",
    )
