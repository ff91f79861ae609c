"""Jobs API: submit (or a dry run), list, get, kill (and remove), logs by cursor (workers, metrics: their modules)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import exceptions, generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import quote
from core.api.params import by_state, flag
from core.api.serializers import DateTimeField
from jobs import hooks, services
from jobs.api import waiting
from jobs.api.progress import ProgressSerializer
from jobs.files import layout
from jobs.follow import logs
from jobs.lookup import job_named, refuse_to_guess_which_run
from jobs.models import ACTIVE_STATES, Job, JobQuerySet, JobState
from jobs.scheduling import queue
from jobs.spec import JobSpecSerializer

MAX_TAIL = 100_000  # lines ?tail= may ask for


def _counts(job: Job, role: str, total: int) -> dict[str, int]:
    names = ("pending", "running", "succeeded", "failed")
    counts = {name: getattr(job, f"{role}s_{name}", 0) for name in names}
    return {"total": total, **counts}


class JobSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    owner = serializers.CharField(source="owner.username")
    datacenter = serializers.CharField(source="datacenter.name")
    trainers = serializers.SerializerMethodField()
    pservers = serializers.SerializerMethodField()
    output = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    build = serializers.SerializerMethodField(help_text="The image build it runs on (spec `build`), else null.")
    priority = serializers.CharField(source="priority_class", read_only=True, help_text="Its priority class.")
    queue_position = serializers.SerializerMethodField(
        help_text="1-based place in its datacenter's queue while it waits (GET of one job only; on a Kueue "
        "datacenter: in its owner's ClusterQueue while Kueue holds it); else null."
    )
    warnings = serializers.ListField(child=serializers.DictField(), read_only=True, help_text="e.g. Stalled.")
    progress = ProgressSerializer(
        read_only=True, allow_null=True, help_text="Where its trainers log total_steps (the docs: Metrics); else null."
    )
    estimated_start = serializers.SerializerMethodField(
        help_text="While it waits, its start by the replayed plan (GET of one job only; the docs: The queue); null "
        "where nothing to estimate from, and for a job that does not wait."
    )
    estimated_end = serializers.SerializerMethodField(
        help_text="Its end by the replayed plan while it waits, or by its progress, history or the datacenter's "
        "average while it runs (GET of one job only); else null."
    )
    estimate_basis = serializers.SerializerMethodField(
        help_text="What the estimates rest on, the least sure of them: now, progress, history, average; null: none."
    )
    failures = serializers.ListField(
        child=serializers.DictField(), read_only=True,
        help_text="The failures it was restarted after (spec max_restarts), the newest last: attempt, reason, "
        "message, exit_code, checkpoint_step (its latest checkpoint then, or null) and at.",
    )  # fmt: skip

    # Its times through core.api's DateTimeField (the same output, without a context-local lookup per value).
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: DateTimeField,
    }

    class Meta:
        model = Job
        fields = [
            "name",
            "uid",
            "owner",
            "datacenter",
            "state",
            "reason",
            "message",
            "exit_code",
            "attempt",
            "restarts",
            "failures",
            "warnings",
            "progress",
            "priority",
            "queue_position",
            "estimated_start",
            "estimated_end",
            "estimate_basis",
            "trainers",
            "pservers",
            "spec",
            "output",
            "url",
            "build",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
        ]

    def get_trainers(self, job: Job) -> dict[str, int]:
        return _counts(job, "trainer", job.trainers)

    def get_pservers(self, job: Job) -> dict[str, int]:
        counts = _counts(job, "pserver", job.pservers)
        counts.pop("succeeded")
        return counts

    def _place(self) -> queue.Place:
        # Only the single-job GET puts it in the context: a list would compute the queue once per job.
        found: queue.Place = self.context.get("place", queue.NOWHERE)
        return found

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_position(self, job: Job) -> int | None:
        return self._place().position

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_estimated_start(self, job: Job) -> str | None:
        when = self._place().estimated_start
        return None if when is None else serializers.DateTimeField().to_representation(when)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_estimated_end(self, job: Job) -> str | None:
        when = self._place().estimated_end
        return None if when is None else serializers.DateTimeField().to_representation(when)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_estimate_basis(self, job: Job) -> str | None:
        return self._place().basis

    def get_output(self, job: Job) -> str:
        return layout.output_logical(job)

    def get_url(self, job: Job) -> str:
        return f"{settings.PADDLECLOUD_PUBLIC_URL.rstrip('/')}/jobs/{job.uid}/"

    @extend_schema_field(
        inline_serializer(
            "JobBuild",
            {"uid": serializers.CharField(), "state": serializers.CharField(), "log_url": serializers.CharField()},
            allow_null=True,
        )
    )
    def get_build(self, job: Job) -> dict[str, str] | None:
        page_builds = self.context.get("builds")  # the list gives those of its whole page (one query)
        build = page_builds.get(job.pk) if page_builds is not None else hooks.image_source_of(job)
        if build is None:
            return None
        api = f"{settings.PADDLECLOUD_PUBLIC_URL.rstrip('/')}/api/v1/images/{build.uid}"
        return {"uid": build.uid, "state": build.state, "log_url": f"{api}/log"}


class DryRunJobSerializer(JobSerializer):
    """The job a dry run would create: what the spec settles (no uid, times or output yet)."""

    class Meta(JobSerializer.Meta):
        fields = ["name", "owner", "datacenter", "state", "trainers", "pservers", "spec"]


class RequestedSerializer(serializers.Serializer):  # type: ignore[type-arg]
    cpu = serializers.FloatField(help_text="cores, trainers and pservers together")
    memory = serializers.IntegerField(help_text="bytes, trainers and pservers together")
    gpu = serializers.IntegerField()


class DryRunSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """`POST /jobs?dry_run=1`: the submit would be accepted; nothing was created."""

    dry_run = serializers.BooleanField(help_text="always true")
    job = DryRunJobSerializer()
    requested = RequestedSerializer()


def jobs_visible_to(request: Request) -> JobQuerySet:
    """The jobs a request sees (Job.objects.visible_to): its own, or an operator's ?owner= or ?all=1."""
    owner = request.query_params.get("owner")
    everyone = request.user.is_staff and flag(request, "all")
    return Job.objects.select_related("owner", "datacenter").visible_to(request.user, owner, everyone)


def get_job(request: Request, name: str) -> Job:
    """A job by uid, or by name (jobs.lookup: the asker's own run first, the active one, else the newest)."""
    job = job_named(jobs_visible_to(request), name, request.user)
    if job is None:
        raise exceptions.NotFound(f"job {quote(name)} not found")
    return job


class JobListCreate(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = JobSerializer

    def get_queryset(self) -> QuerySet[Job]:
        jobs = by_state(jobs_visible_to(self.request).listed(), self.request, JobState.values, ACTIVE_STATES)
        return jobs.order_by("-created_at", "-pk")  # totally: a page may be read backwards (core.paging)

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], list):  # a page: the builds its jobs name, in one query
            kwargs["context"] = {**self.get_serializer_context(), "builds": hooks.image_sources_of(args[0])}
        return super().get_serializer(*args, **kwargs)

    @extend_schema(
        request=JobSpecSerializer,
        parameters=[
            OpenApiParameter(
                "dry_run", bool, required=False,
                description="1 or true: check everything a submit checks (spec, package, registry, quota, name) "
                "and create nothing; answers 200 with the job as it would be created",
            ),
            OpenApiParameter(
                "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
                description="a key of the client's choosing (e.g. a UUID) that names this submission: sent again "
                "with the same key, the submit answers with the job it created (header Idempotent-Replayed: true) "
                "instead of creating a second one; at most 200 printable ASCII characters",
            ),
            OpenApiParameter(
                "upload_pending", bool, required=False,
                description="with dry_run: the package will be uploaded after this check, so its path must be "
                "writable by you but need not exist yet (what `paddlectl submit DIR` asks before uploading)",
            ),
        ],
        responses={201: JobSerializer, 200: DryRunSerializer},
    )
    def post(self, request: Request) -> Response:
        dry_run = flag(request, "dry_run")
        upload_pending = flag(request, "upload_pending")
        if upload_pending and not dry_run:
            raise exceptions.ValidationError({"upload_pending": ["only with dry_run=1"]})
        key = _idempotency_key(request)
        try:
            done = services.submit_request(request.user, request.data, dry_run, upload_pending, key)  # type: ignore[arg-type]
        except services.InvalidSpec as exc:
            raise exceptions.ValidationError(exc.problems) from None  # each field's messages, as the serializer's
        if done.replayed:
            replayed = JobSerializer(Job.objects.select_related("owner", "datacenter").get(pk=done.job.pk)).data
            return Response(replayed, status=status.HTTP_201_CREATED, headers={"Idempotent-Replayed": "true"})
        if dry_run and done.checked is not None:
            checked = done.checked
            answer = {
                "dry_run": True,
                "job": DryRunJobSerializer(done.job).data,
                "requested": {"cpu": float(checked.cpu), "memory": checked.memory, "gpu": checked.gpu},
            }
            return Response(answer, status=status.HTTP_200_OK)
        job = Job.objects.select_related("owner", "datacenter").get(pk=done.job.pk)
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)


IDEMPOTENCY_KEY_MAX = 200


def _idempotency_key(request: Request) -> str | None:
    """The submit's Idempotency-Key header: printable ASCII, 1 to IDEMPOTENCY_KEY_MAX characters; None if absent."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not (0 < len(key) <= IDEMPOTENCY_KEY_MAX and key.isascii() and key.isprintable() and key.strip() == key):
        raise exceptions.ValidationError(
            {"Idempotency-Key": [f"must be 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters, e.g. a UUID"]}
        )
    return key


def _wait_params(request: Request) -> tuple[str, float]:
    """`?state=` (a job state) and `?wait=` (seconds, 0 to waiting.MAX_WAIT), both or neither; 400 naming the field."""
    seen, wait = request.query_params.get("state"), request.query_params.get("wait")
    if seen is None and wait is None:
        return "", 0.0
    if seen not in JobState.values:
        raise exceptions.ValidationError({"state": [f"with wait, must be one of {', '.join(JobState.values)}"]})
    try:
        seconds = float(wait or "")
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= waiting.MAX_WAIT:
        raise exceptions.ValidationError({"wait": [f"must be a number of seconds from 0 to {waiting.MAX_WAIT:g}"]})
    return seen, seconds


class JobDetail(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, required=False, description="with wait: answer once the state is not this"),
            OpenApiParameter("wait", float, required=False, description=f"seconds, at most {waiting.MAX_WAIT:g}"),
        ],
        responses=JobSerializer,
    )
    def get(self, request: Request, name: str) -> Response:
        seen, wait = _wait_params(request)
        job = get_job(request, name)
        if seen:
            waiting.until_state_leaves(job, seen, wait, request.user.pk or 0)
            try:
                job.refresh_from_db()
            except Job.DoesNotExist:
                raise exceptions.NotFound(f"job {quote(name)} was removed") from None
        return Response(JobSerializer(job, context={"place": queue.place(job)}).data)

    @extend_schema(parameters=[OpenApiParameter("rm", bool, required=False)], responses={200: JobSerializer, 204: None})
    def delete(self, request: Request, name: str) -> Response:
        remove = flag(request, "rm")
        job = get_job(request, name)
        if remove:
            refuse_to_guess_which_run(jobs_visible_to(request), name, job)
            services.remove(job)
            return Response(status=status.HTTP_204_NO_CONTENT)
        services.kill(job)
        return Response(JobSerializer(job).data)


# What every answer read by cursor (logs, metrics) ends with.
CURSOR_FIELDS: dict[str, serializers.Field] = {  # type: ignore[type-arg]
    "cursor": serializers.CharField(),
    "complete": serializers.BooleanField(),
    "state": serializers.ChoiceField(JobState.choices),
}


class JobLogs(APIView):
    """Text after `cursor` and the next cursor: a follower never misses or repeats a line."""

    @extend_schema(
        parameters=[
            OpenApiParameter("worker", str, description="trainer-0 (default), pserver-1, ..."),
            OpenApiParameter("cursor", str, description="from the previous answer; empty: from the start"),
            OpenApiParameter(
                "tail", int, description=f"only the last N lines, 0 to {MAX_TAIL} (the cursor then points to the end)"
            ),
        ],
        responses=inline_serializer(
            "LogText",
            {
                "job": serializers.CharField(),
                "worker": serializers.CharField(),
                "text": serializers.CharField(),
                "times": serializers.ListField(
                    child=serializers.FloatField(allow_null=True),
                    help_text="when each line that starts in `text` arrived (unix seconds, ms precision), in "
                    "order: the text's first character starts a line (it may continue the previous answer's "
                    "last line, whose time that was), and so does each character after a newline; null where "
                    "no time was kept (a log written before times were, or a pod's own log)",
                ),
                **CURSOR_FIELDS,
            },
        ),
    )
    def get(self, request: Request, name: str) -> Response:
        job, worker = job_and_worker(request, name)
        cursor = request.query_params.get("cursor", "")
        tail = request.query_params.get("tail")
        if tail is None:
            read = logs.read(job, worker, cursor)
        else:
            if not (len(tail) <= 6 and tail.isascii() and tail.isdigit() and int(tail) <= MAX_TAIL):
                raise exceptions.ValidationError({"tail": [f"must be a whole number from 0 to {MAX_TAIL}"]})
            read = logs.read_tail(job, worker, cursor, int(tail))
        return Response(
            {
                "job": job.name,
                "worker": worker,
                "text": read.text,
                "times": read.times,
                "cursor": read.cursor,
                "complete": read.complete,
                "state": job.state,
            }
        )


def job_and_worker(request: Request, name: str) -> tuple[Job, str]:
    """The job of a logs or metrics request and its ?worker= (default trainer-0); a 400 naming it if the job
    has none such."""
    job = get_job(request, name)
    worker = request.query_params.get("worker", "trainer-0")
    names = set(job.worker_names)
    if worker not in names:
        raise exceptions.ValidationError(
            {"worker": [f"{quote(worker)} is not a worker of {job.name}; it has {_listed(sorted(names))}"]}
        )
    return job, worker


def _listed(names: list[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")

