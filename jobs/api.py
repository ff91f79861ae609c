"""Jobs API: submit (or a dry run), list, get, kill (and remove), workers, and logs and metrics by cursor."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import exceptions, generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import quote
from core.api.params import by_state, flag
from images import for_jobs
from jobs import metrics, packages, services
from jobs.engines import engine_for
from jobs.logfiles import LogChunk, line_count
from jobs.models import ACTIVE_STATES, Job, JobState, Worker
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

    def get_output(self, job: Job) -> str:
        real = packages.output_dir(job.datacenter, job.owner.username, job.name, job.uid)
        return packages.logical(job.datacenter, real)

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
        build = page_builds.get(job.pk) if page_builds is not None else for_jobs.build_of(job)
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


class WorkerSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    name = serializers.CharField(read_only=True)

    class Meta:
        model = Worker
        fields = ["name", "role", "index", "state", "host", "pid", "started_at", "restarts", "exit_code", "message"]


def jobs_visible_to(request: Request) -> QuerySet[Job]:
    """The jobs a request sees (Job.objects.visible_to): its own, or an operator's ?owner= or ?all=1."""
    owner = request.query_params.get("owner")
    everyone = request.user.is_staff and flag(request, "all")
    return Job.objects.select_related("owner", "datacenter").visible_to(request.user, owner, everyone)


def get_job(request: Request, name: str) -> Job:
    """A job by uid, or by name (its active run if any, else the newest)."""
    jobs = jobs_visible_to(request)
    # A uid pins one run; a name means its active run, else the newest.
    job = (
        jobs.filter(uid=name).first()
        or jobs.filter(name=name, state__in=ACTIVE_STATES).first()
        or jobs.filter(name=name).first()
    )
    if job is None:
        raise exceptions.NotFound(f"job {quote(name)} not found")
    return job


class JobListCreate(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = JobSerializer

    def get_queryset(self) -> QuerySet[Job]:
        jobs = by_state(jobs_visible_to(self.request), self.request, JobState.values, ACTIVE_STATES)
        return jobs.order_by("-created_at")

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], list):  # a page: the builds its jobs name, in one query
            kwargs["context"] = {**self.get_serializer_context(), "builds": for_jobs.builds_of(args[0])}
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
        serializer = JobSpecSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        jobname = serializer.validated_data["jobname"]
        # Before the checks: the job a retried submit made counts in the quota and holds the name.
        earlier = None if dry_run else services.submitted_with(request.user, key, jobname)  # type: ignore[arg-type]
        if earlier is not None:
            replayed = JobSerializer(Job.objects.select_related("owner", "datacenter").get(pk=earlier.pk)).data
            return Response(replayed, status=status.HTTP_201_CREATED, headers={"Idempotent-Replayed": "true"})
        checked = services.check(request.user, serializer.validated_data, upload_pending)  # type: ignore[arg-type]
        if dry_run:
            job = services.dry_run(checked)
            answer = {
                "dry_run": True,
                "job": DryRunJobSerializer(job).data,
                "requested": {"cpu": float(checked.cpu), "memory": checked.memory, "gpu": checked.gpu},
            }
            return Response(answer, status=status.HTTP_200_OK)
        job = services.submit(checked, key)
        job = Job.objects.select_related("owner", "datacenter").get(pk=job.pk)
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


class JobDetail(APIView):
    @extend_schema(responses=JobSerializer)
    def get(self, request: Request, name: str) -> Response:
        return Response(JobSerializer(get_job(request, name)).data)

    @extend_schema(parameters=[OpenApiParameter("rm", bool, required=False)], responses={200: JobSerializer, 204: None})
    def delete(self, request: Request, name: str) -> Response:
        remove = flag(request, "rm")
        job = get_job(request, name)
        if remove:
            services.remove(job)
            return Response(status=status.HTTP_204_NO_CONTENT)
        services.kill(job)
        return Response(JobSerializer(job).data)


class JobWorkers(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = WorkerSerializer

    def get_queryset(self) -> QuerySet[Worker]:
        return get_job(self.request, self.kwargs["name"]).workers.order_by("role", "index")


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
                "cursor": serializers.CharField(),
                "complete": serializers.BooleanField(),
                "state": serializers.ChoiceField(JobState.choices),
            },
        ),
    )
    def get(self, request: Request, name: str) -> Response:
        job = get_job(request, name)
        worker = _worker_of(request, job)
        engine = engine_for(job.datacenter)
        cursor = request.query_params.get("cursor", "")
        tail = request.query_params.get("tail")
        if tail is None:
            chunk = engine.read_log(job, worker, cursor)
            text, times = chunk.text, _times_of(chunk)
        else:
            if not (len(tail) <= 6 and tail.isascii() and tail.isdigit() and int(tail) <= MAX_TAIL):
                raise exceptions.ValidationError({"tail": [f"must be a whole number from 0 to {MAX_TAIL}"]})
            # Read to the end keeping only the last lines, so the cursor returned follows from there.
            text, times, chunk = "", [], engine.read_log(job, worker, cursor)
            while True:
                text, times = _last_lines(*_joined(text, times, chunk), int(tail))
                following = engine.read_log(job, worker, chunk.cursor)
                if following.cursor == chunk.cursor:
                    break
                chunk = following
        return Response(
            {
                "job": job.name,
                "worker": worker,
                "text": text,
                "times": times,
                "cursor": chunk.cursor,
                "complete": chunk.complete,
                "state": job.state,
            }
        )


def _worker_of(request: Request, job: Job) -> str:
    """The ?worker= of a logs or metrics request (default trainer-0); a 400 naming it if the job has none such."""
    worker = request.query_params.get("worker", "trainer-0")
    names = set(job.worker_names)
    if worker not in names:
        raise exceptions.ValidationError(
            {"worker": [f"{quote(worker)} is not a worker of {job.name}; it has {_listed(sorted(names))}"]}
        )
    return worker


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
                    },
                    many=True,
                ),
                "skipped": serializers.IntegerField(help_text="lines that were not metric points"),
                "cursor": serializers.CharField(),
                "complete": serializers.BooleanField(),
                "state": serializers.ChoiceField(JobState.choices),
            },
        ),
    )
    def get(self, request: Request, name: str) -> Response:
        job = get_job(request, name)
        worker = _worker_of(request, job)
        answer = metrics.read_points(job, worker, request.query_params.get("cursor", ""))
        return Response({"job": job.name, "worker": worker, **answer, "state": job.state})


def _listed(names: list[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


Times = list[float | None]


def _times_of(chunk: LogChunk) -> Times:
    """One time per line starting in the chunk's text (null each where the engine kept none)."""
    return chunk.times if chunk.times is not None else [None] * line_count(chunk.text)


def _joined(text: str, times: Times, chunk: LogChunk) -> tuple[str, Times]:
    """`text` followed by the chunk's; a line the chunk only continues keeps the time of its start."""
    more = _times_of(chunk)
    if text and not text.endswith("\n"):
        more = more[1:]
    return text + chunk.text, times + more


def _last_lines(text: str, times: Times, count: int) -> tuple[str, Times]:
    """The last `count` lines (a line ends at a newline; a `\r` progress update stays in its line)."""
    if not count:
        return "", []
    lines = text.split("\n")
    whole = len(lines) - 1 if lines[-1] == "" else len(lines)
    first = max(0, whole - count)
    return "\n".join(lines[first:]), times[len(times) - (whole - first) :] if whole > first else []
