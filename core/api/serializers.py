"""Serializer base classes: unknown fields are an error, never silently ignored."""

from __future__ import annotations

from typing import Any

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
