"""A run's checkpoints over the API: GET /api/v1/jobs/<name>/checkpoints, each with its step, when it was saved,
its size, the metric it was saved with and its path (download it with the files API or `paddlectl file cp`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.api.jobs import get_job
from jobs.files import checkpoints


class JobCheckpoints(APIView):
    """What paddlecloud.checkpoint saved in the run's output folder, by step (the newest 200)."""

    @extend_schema(
        responses=inline_serializer(
            "Checkpoints",
            {
                "job": serializers.CharField(),
                "checkpoints": inline_serializer(
                    "Checkpoint",
                    {
                        "step": serializers.IntegerField(),
                        "path": serializers.CharField(help_text="/pfs/<dc>/home/<user>/jobs/<name>/output/<uid>/..."),
                        "time": serializers.FloatField(help_text="when it was saved (seconds since the epoch)"),
                        "size": serializers.IntegerField(help_text="bytes of its files"),
                        "complete_size": serializers.BooleanField(help_text="false: over 10,000 files, size counts"
                                                                            " the first"),
                        "metric": serializers.FloatField(allow_null=True, help_text="what save(metric=) was given"),
                    },
                    many=True,
                ),
            },
        )
    )
    def get(self, request: Request, name: str) -> Response:
        job = get_job(request, name)
        found = [vars(c) for c in checkpoints.listed(job)]
        return Response({"job": job.uid, "checkpoints": found})
