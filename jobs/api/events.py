"""A job's timeline over the API: GET /api/v1/jobs/<name>/events, oldest first, paginated like every list."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import generics, serializers

from jobs.api.jobs import get_job
from jobs.models import JobEvent


class JobEventSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = JobEvent
        fields = ["time", "kind", "worker", "message"]


class JobEvents(generics.ListAPIView):  # type: ignore[type-arg]
    """The job's events (its owner's; staff see every job's), named as the other job routes name it."""

    serializer_class = JobEventSerializer

    def get_queryset(self) -> QuerySet[JobEvent]:
        return get_job(self.request, self.kwargs["name"]).events.order_by("time", "id")
