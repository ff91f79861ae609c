"""The shape of a job's `progress` in the API (jobs.follow.progress computes it; the reconciler stores it)."""

from __future__ import annotations

from rest_framework import serializers


class ProgressSerializer(serializers.Serializer):  # type: ignore[type-arg]
    step = serializers.IntegerField(help_text="the last step its slowest trainer logged")
    total_steps = serializers.IntegerField(help_text="the total that trainer logged with it")
    fraction = serializers.FloatField(help_text="step / total_steps, 0 to 1")
    eta_seconds = serializers.IntegerField(
        allow_null=True, help_text="seconds left at the recent rate; null when unknown, while it is Stalled (its "
        "warnings say so) or after its end"
    )
    rate_steps_per_s = serializers.FloatField(allow_null=True, help_text="over its last few minutes of points")
