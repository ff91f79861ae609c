"""Queue API: a datacenter's waiting jobs in admission order, the priority classes a user may use, and the
operators' hold / release / move-to-front of a waiting job (the rules are jobs/scheduling/queue.py's)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, generics, serializers
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import quote
from jobs import services
from jobs.api.jobs import JobSerializer
from jobs.lookup import job_named
from jobs.models import Job, PriorityClass
from jobs.scheduling import priorities, queue

MAX_DATACENTER_PARAM = 40  # a datacenter's name is at most 40 characters

QUEUE_ROW = inline_serializer(
    "QueueRow",
    {
        "position": serializers.IntegerField(
            allow_null=True,
            help_text="1-based, in the order the scheduler admits; null: held, or not yet looked at by a cycle "
            "(past the first 50 waiting jobs of its owner). On a Kueue datacenter the jobs Kueue holds come first, "
            "each at its place in its owner's own ClusterQueue",
        ),
        "job": serializers.CharField(allow_null=True, help_text="the name; null for another user's job"),
        "uid": serializers.CharField(allow_null=True, help_text="null for another user's job"),
        "owner": serializers.CharField(help_text=f"the owner's user name; {queue.OTHERS!r} for another user's job"),
        "priority": serializers.CharField(help_text="the priority class"),
        "reason": serializers.CharField(help_text="WaitingForCapacity, QuotaExhausted, Held, or empty"),
        "message": serializers.CharField(),
        "waited": serializers.FloatField(help_text="seconds since it was submitted"),
        "requests": inline_serializer(
            "QueueRequests",
            {
                "cpu": serializers.FloatField(help_text="cores, the whole job"),
                "memory": serializers.IntegerField(help_text="bytes, the whole job"),
                "gpu": serializers.IntegerField(),
            },
        ),
        "estimated_start": serializers.DateTimeField(
            allow_null=True,
            help_text="by the scheduler's plan replayed over the expected ends (the docs: The queue); null where it "
            "waits behind an end nothing estimates (no progress, history or finished job to go on)",
        ),
        "estimated_end": serializers.DateTimeField(
            allow_null=True, help_text="its estimated start + its expected duration; null where either is unknown"
        ),
        "estimate_basis": serializers.CharField(
            allow_null=True,
            help_text="the least sure figure the estimates rest on: now, progress, history, average; null: none",
        ),
    },
)


class QueueView(APIView):
    """`GET /api/v1/queue?datacenter=`: the waiting jobs; other users' without their names (staff see all)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "datacenter", str, required=False, description="a datacenter you may use; default: your only one"
            )
        ],
        responses=inline_serializer(
            "Queue",
            {
                "datacenter": serializers.CharField(),
                "count": serializers.IntegerField(help_text="jobs waiting in all, held ones included"),
                "truncated": serializers.BooleanField(
                    help_text=f"true: only the first {queue.MAX_ROWS} of `count` are in `results`"
                ),
                "results": serializers.ListField(child=QUEUE_ROW),
            },
        ),
    )
    def get(self, request: Request) -> Response:
        name = request.query_params.get("datacenter")
        if name is not None and not 0 < len(name) <= MAX_DATACENTER_PARAM:
            raise exceptions.ValidationError({"datacenter": [f"must be 1 to {MAX_DATACENTER_PARAM} characters"]})
        datacenter = services.choose_datacenter(request.user, name)  # type: ignore[arg-type]
        waiting = queue.queue(datacenter, request.user)
        rows = [
            {**row, "estimated_start": _stamp(row["estimated_start"]), "estimated_end": _stamp(row["estimated_end"])}
            for row in waiting.rows
        ]
        return Response(
            {"datacenter": datacenter.name, "count": waiting.count, "truncated": waiting.truncated, "results": rows}
        )


def _stamp(value: Any) -> str | None:
    return serializers.DateTimeField().to_representation(value) if value is not None else None


class PrioritySerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = PriorityClass
        fields = ["name", "value", "description"]


class PriorityList(generics.ListAPIView):  # type: ignore[type-arg]
    """`GET /api/v1/priorities`: the classes the caller may submit with (`-priority`), highest first."""

    serializer_class = PrioritySerializer

    def get_queryset(self) -> Any:
        return priorities.usable_by(self.request.user).order_by("-value", "name")


def operated_job(request: Request, name: str) -> Job:
    """The job an operator names: a uid, or a name among everyone's (their own first; `?owner=` narrows)."""
    owner = request.query_params.get("owner")
    jobs = Job.objects.select_related("owner", "datacenter").visible_to(request.user, owner, everyone=True)
    job = job_named(jobs, name, request.user)
    if job is None:
        raise exceptions.NotFound(f"job {quote(name)} not found")
    return job


class _OperatorVerb(APIView):
    """Staff only: one of jobs/scheduling/queue.py's verbs on a waiting job; the job as it is after it."""

    permission_classes = [IsAdminUser]

    def act(self, job: Job) -> Job:
        raise NotImplementedError

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("owner", str, required=False, description="whose job `name` is")],
        responses=JobSerializer,
    )
    def post(self, request: Request, name: str) -> Response:
        job = self.act(operated_job(request, name))
        return Response(JobSerializer(job).data)


class JobHold(_OperatorVerb):
    """Hold a waiting job: it is not admitted until released (reason Held). 409 naming `state` otherwise."""

    def act(self, job: Job) -> Job:
        return services.hold(job)


class JobRelease(_OperatorVerb):
    """Release a held job: it waits for admission again."""

    def act(self, job: Job) -> Job:
        return services.release(job)


class JobFront(_OperatorVerb):
    """Move a waiting job to the front of its priority class."""

    def act(self, job: Job) -> Job:
        return services.front(job)
