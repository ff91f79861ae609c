"""A worker's metric points over the API: GET /api/v1/jobs/<name>/metrics, read by cursor like its log."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.api.jobs import CURSOR_FIELDS, job_and_worker
from jobs.follow import metrics


class JobMetrics(APIView):
    """Metric points a worker logged with paddlecloud.metrics.log, after `cursor`: read like its log."""

    @extend_schema(
        parameters=[
            OpenApiParameter("worker", str, description="trainer-0 (default), trainer-1, ..."),
            OpenApiParameter("cursor", str, description="from the previous answer; empty: from the start"),
        ],
        responses=inline_serializer(
            "MetricPoints",
            {
                "job": serializers.CharField(),
                "worker": serializers.CharField(),
                "points": inline_serializer(
                    "MetricPoint",
                    {
                        "step": serializers.IntegerField(),
                        "time": serializers.FloatField(allow_null=True),
                        "values": serializers.DictField(child=serializers.FloatField()),
                        "total_steps": serializers.IntegerField(required=False, help_text="where the line has one"),
                    },
                    many=True,
                ),
                "skipped": serializers.IntegerField(help_text="lines that were not metric points"),
                **CURSOR_FIELDS,
            },
        ),
    )
    def get(self, request: Request, name: str) -> Response:
        job, worker = job_and_worker(request, name)
        answer = metrics.read_points(job, worker, request.query_params.get("cursor", ""))
        return Response({"job": job.name, "worker": worker, **answer, "state": job.state})
