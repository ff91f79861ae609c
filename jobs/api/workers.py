"""A job's workers over the API: GET /api/v1/jobs/<name>/workers (with live `usage`) and .../usage (its history)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.api.jobs import get_job
from jobs.engines.usage_samples import HISTORY_POINTS
from jobs.follow import worker_usage
from jobs.models import Worker


class WorkerUsageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """jobs.engines.usage_samples.WorkerUsage as JSON (the schema's description of it)."""

    cpu_cores = serializers.FloatField()
    memory_bytes = serializers.IntegerField()
    gpu_util = serializers.FloatField(allow_null=True, help_text="percent, the mean over the worker's GPUs")
    gpu_memory_bytes = serializers.IntegerField(allow_null=True)
    sampled_at = serializers.DateTimeField()


class WorkerSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    name = serializers.CharField(read_only=True)
    usage = serializers.SerializerMethodField(help_text="the latest sample while it runs; null before and after")

    class Meta:
        model = Worker
        fields = [
            "name", "role", "index", "state", "host", "pid", "started_at", "restarts", "exit_code", "message", "usage",
        ]  # fmt: skip

    @extend_schema_field(WorkerUsageSerializer(allow_null=True))
    def get_usage(self, worker: Worker) -> dict[str, Any] | None:
        return worker_usage.live(worker)


class JobWorkers(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = WorkerSerializer

    def get_queryset(self) -> QuerySet[Worker]:
        return get_job(self.request, self.kwargs["name"]).workers.defer("usage_history").order_by("role", "index")


MAX_CHARTED = 64  # workers per answer (pservers, then trainers, by index): a 1,000-trainer job's chart stays a few
# hundred KB, and no chart shows more lines legibly; `more_workers` says how many were left out


class JobUsage(APIView):
    """Each worker's sampled CPU and memory over the job's run (HISTORY_POINTS at most each), for its chart."""

    @extend_schema(
        responses=inline_serializer(
            "JobUsageHistory",
            {
                "job": serializers.CharField(),
                "state": serializers.CharField(),
                "workers": inline_serializer(
                    "WorkerUsageHistory",
                    {
                        "name": serializers.CharField(),
                        "points": serializers.ListField(
                            child=serializers.ListField(child=serializers.FloatField()),
                            help_text=f"[unix seconds, cpu cores, memory bytes], {HISTORY_POINTS} at most",
                        ),
                    },
                    many=True,
                ),
                "more_workers": serializers.IntegerField(help_text=f"workers past the first {MAX_CHARTED}, left out"),
            },
        )
    )
    def get(self, request: Request, name: str) -> Response:
        job = get_job(request, name)
        workers = job.workers.order_by("role", "index")
        charted = workers.only("role", "index", "usage_history")[:MAX_CHARTED]
        series = [{"name": w.name, "points": (w.usage_history or [])[-HISTORY_POINTS:]} for w in charted]
        more = max(0, workers.count() - MAX_CHARTED)
        return Response({"job": job.name, "state": job.state, "workers": series, "more_workers": more})
