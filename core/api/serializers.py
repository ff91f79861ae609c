"""Serializer base classes: unknown fields are an error, never silently ignored; times in the portal's zone."""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers


class StrictMixin:
    """Reject keys the serializer does not know, so a typo ('pasword') is named, not dropped."""

    initial_data: Any
    fields: Any

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(set(data) - writable)
            if unknown:
                raise serializers.ValidationError(
                    {name: [f"unknown field; expected one of: {', '.join(sorted(writable))}"] for name in unknown}
                )
        elif data is not None:
            raise serializers.ValidationError({"non_field_errors": ["expected a JSON object"]})
        return super().to_internal_value(data)  # type: ignore[misc]


class StrictSerializer(StrictMixin, serializers.Serializer):  # type: ignore[type-arg]
    pass


class StrictModelSerializer(StrictMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    pass


class DateTimeField(serializers.DateTimeField):
    """DRF's, in the portal's time zone (TIME_ZONE), which it finds without asking for the current zone per value.

    DRF's own looks the current zone up in asgiref's context-local storage for every value it writes: a sixth of
    serializing a page of 50 jobs (a profile of bench/pages.py's API request). The portal never activates another
    zone (no ``timezone.activate``), so the current zone is always the default one, and the output is the same.
    """

    def default_timezone(self) -> tzinfo | None:
        return timezone.get_default_timezone() if settings.USE_TZ else None
