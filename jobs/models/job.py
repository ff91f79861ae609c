"""The training job (a state machine row), its workers (one per pserver/trainer process or pod) and its timeline."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from paddlecloud.contract import states
from paddlecloud.contract.states import worker_name, worker_names


class JobState(models.TextChoices):  # the names are the client's too (paddlecloud.contract.states)
    QUEUED = states.QUEUED  # row written, submit_job enqueued on commit
    SUBMITTING = states.SUBMITTING  # a worker is asking the engine to start it
    PENDING = states.PENDING  # the engine accepted it; processes/pods not all running yet
    RUNNING = states.RUNNING  # every process/pod started
    SUCCEEDED = states.SUCCEEDED  # every trainer exited 0 (pservers were then stopped)
    FAILED = states.FAILED  # see reason and exit_code
    KILLED = states.KILLED  # the owner or an operator killed it


ACTIVE_STATES = tuple(JobState(state) for state in states.ACTIVE_JOB_STATES)
STARTED_STATES = tuple(JobState(state) for state in states.STARTED_JOB_STATES)
TERMINAL_STATES = tuple(JobState(state) for state in states.TERMINAL_JOB_STATES)
# A trial's experiment uid and index, kept in its spec by the experiment's own submit; the job sees them as
# PADDLECLOUD_EXPERIMENT and PADDLECLOUD_TRIAL.
SPEC_EXPERIMENT, SPEC_TRIAL = "experiment", "trial"
# The checkpoint a job starts from ({"path", "step"}), chosen at submit (spec `resume_from`, or a failed rerun's);
# the job sees its path as PADDLECLOUD_RESUME_FROM.
RESUME_CHECKPOINT = "resume_checkpoint"


class Reason(models.TextChoices):
    """Why a job is where it is; shown to the user next to the state."""

    NONE = ""
    KILLED = "Killed"
    PSERVER_LOST = "PserverLost"  # a pserver died: trainers would exit 0 with nothing learned
    TRAINER_FAILED = "TrainerFailed"  # a trainer exited non-zero (no retries configured)
    BACKOFF_LIMIT = "BackoffLimit"  # a trainer failed more than max_retries times
    PENDING_TIMEOUT = "PendingTimeout"
    UNSCHEDULABLE = "Unschedulable"
    IMAGE_PULL = "ImagePullBackOff"
    OOM_KILLED = "OOMKilled"
    QUOTA_EXCEEDED = "QuotaExceeded"
    SUBMIT_FAILED = "SubmitFailed"
    LAUNCH_FAILED = "LaunchFailed"  # a process could not be started or vanished without a status
    IMAGE_BUILDING = "ImageBuilding"  # queued until the image build it names (spec `build`) ends
    BUILD_FAILED = "BuildFailed"  # that build failed or was cancelled; the message is its last error line
    STORAGE_QUOTA_EXCEEDED = "StorageQuotaExceeded"  # its owner's files outgrew the storage quota while it ran
    PIDS_LIMIT = "PidsLimit"  # a worker hit the datacenter's process limit and could not fork
    RENDEZVOUS_TIMEOUT = "RendezvousTimeout"  # PS mode: the trainers' gloo rendezvous did not complete in its bound
    WAITING_FOR_CAPACITY = "WaitingForCapacity"  # queued: the datacenter has not enough free now (jobs/scheduling)
    QUOTA_EXHAUSTED = "QuotaExhausted"  # queued: its owner's running jobs use the quota up; it starts as they end
    HELD = "Held"  # queued: an operator holds it; it starts only once released
    STALLED = "Stalled"  # no trainer wrote a log line or used CPU for its stall_timeout, and its stall_action is `fail`
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"  # queued: a job of its `after` has not ended as asked yet
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"  # failed unstarted: an `after` job ended otherwise
    RESTARTING = "Restarting"  # queued again after a failure (spec max_restarts): from its latest checkpoint
    RESIZING = "Resizing"  # queued again to grow: an elastic job (spec min_parallelism) runs again with more trainers
    CRASH_LOOP = "CrashLoop"  # failed: its last restarts each failed with no new checkpoint between them
    EARLY_STOPPED = "EarlyStopped"  # killed by its experiment's search (ASHA): its metric fell behind at a rung
    PREEMPTED = "Preempted"  # queued again: a job of higher priority needed its room; it runs again, attempt + 1
    ENGINE_ERROR = "EngineError"  # failed: the portal could not follow it for many cycles in a row (unforeseen)


class Role(models.TextChoices):
    PSERVER = states.PSERVER
    TRAINER = states.TRAINER


class JobQuerySet(models.QuerySet["Job"]):
    def visible_to(self, user: Any, owner: str | None = None, everyone: bool = False) -> JobQuerySet:
        """The one rule for whose jobs a user sees: their own; an operator also sees `owner`'s, or everyone's."""
        if getattr(user, "is_staff", False) and owner:
            return self.filter(owner__username=owner)
        if getattr(user, "is_staff", False) and everyone:
            return self
        return self.filter(owner_id=user.pk)

    def listed(self) -> JobQuerySet:
        """For a list of many jobs (the page, the API): each joined to its owner's and datacenter's names and
        nothing else of them. A datacenter has about 60 columns: building all of them for every row of a list took
        half of its rows' load (50 rows: 10.4 against 5.0 ms). What a list shows of either must be named here."""
        apps = self.model._meta.apps
        unlisted = [
            f"{relation}__{field.name}"
            for relation, model, shown in (
                ("owner", apps.get_model(settings.AUTH_USER_MODEL), {"id", "username"}),
                ("datacenter", apps.get_model("datacenters", "Datacenter"), {"id", "name"}),
            )
            for field in model._meta.concrete_fields
            if field.name not in shown
        ]
        return self.select_related("owner", "datacenter").defer(*unlisted)


class Job(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs")
    datacenter = models.ForeignKey("datacenters.Datacenter", on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(max_length=40, help_text="The user's name for it; unique among their active jobs.")
    uid = models.CharField(
        max_length=48, unique=True, help_text="Name of the engine's objects: name + a short unique suffix."
    )
    spec = models.JSONField(help_text="The validated spec, as submitted (see jobs.spec).")

    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.QUEUED, db_index=True)
    reason = models.CharField(max_length=40, choices=Reason.choices, blank=True, default="")
    message = models.TextField(blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True, help_text="The failing process's own exit code.")

    # Per-role counts, refreshed by every reconcile.
    trainers_pending = models.PositiveIntegerField(default=0)
    trainers_running = models.PositiveIntegerField(default=0)
    trainers_succeeded = models.PositiveIntegerField(default=0)
    trainers_failed = models.PositiveIntegerField(default=0)
    pservers_pending = models.PositiveIntegerField(default=0)
    pservers_running = models.PositiveIntegerField(default=0)
    pservers_failed = models.PositiveIntegerField(default=0)

    # Engine-private facts (ports, namespace, ...) so a restarted worker finds the job again.
    engine_data = models.JSONField(default=dict, blank=True)
    # False until the engine confirmed that nothing of a finished job runs any more.
    released = models.BooleanField(default=False)
    # True once the engine's objects of a finished job were deleted after the datacenter's TTL.
    cleaned = models.BooleanField(default=False)
    # `kill -rm`: forget the job (delete its row) once the engine released it.
    remove_when_released = models.BooleanField(default=False)

    # The scheduler's (jobs/scheduling): what the whole job holds while admitted, and where it stands in the queue.
    cpu_request = models.DecimalField(max_digits=12, decimal_places=3, default=0)
    memory_request = models.BigIntegerField(default=0)
    gpu_request = models.PositiveIntegerField(default=0)
    priority_class = models.CharField(max_length=40, default="normal")
    priority = models.IntegerField(default=100, help_text="The priority class's value when submitted; higher first.")
    admitted_at = models.DateTimeField(
        null=True,
        blank=True,
        db_index=True,
        help_text="When the scheduler let it start: from then on it holds its requests.",
    )
    held = models.BooleanField(default=False, help_text="An operator holds it in the queue.")
    blocked = models.BooleanField(
        default=False, help_text="It waits for the jobs of its spec's `after` (jobs.dependencies); not scheduled."
    )
    team = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The owner's team when submitted (datacenters.TeamQuota): its quota and share count this job.",
    )  # fmt: skip
    borrowing = models.BooleanField(
        default=False, help_text="Admitted past its team's quota, on room other teams left idle: reclaimable."
    )
    preemptible = models.BooleanField(default=True, help_text="A waiting job of higher priority may stop it.")
    attempt = models.PositiveIntegerField(
        default=1, help_text="Its run: one more each time it was preempted or restarted after a failure."
    )
    restarts = models.PositiveIntegerField(default=0, help_text="Restarts after a failure so far (spec max_restarts).")
    min_trainers = models.PositiveIntegerField(
        default=0, help_text="Elastic: its fewest trainers (spec min_parallelism); 0: a fixed size (jobs/scheduling)."
    )
    max_trainers = models.PositiveIntegerField(default=0, help_text="Elastic: its most trainers (spec parallelism).")
    trainers_now = models.PositiveIntegerField(
        default=0, help_text="Elastic: the trainers it was admitted with (its requests are theirs); 0: parallelism."
    )
    checkpointed_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When its newest checkpoint was saved, as the sampler last saw it: a preemption stops the job that "
        "loses the least work since its checkpoint (jobs.scheduling.strategies.victims).",
    )  # fmt: skip
    failures = models.JSONField(
        default=list, blank=True,
        help_text="The failures it restarted after (jobs.follow.restarts), the newest last: attempt, reason, message, "
        "exit code, its latest checkpoint's step then, and when.",
    )  # fmt: skip
    preempted_at = models.DateTimeField(
        null=True, blank=True, help_text="Set while a preemption stops its workers; cleared once it waits again."
    )
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When it last began to wait (its submit, or its preemption)."
    )
    stalled_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Since when no trainer wrote a log line or used CPU for its stall timeout (jobs.follow.stalls).",
    )
    progress = models.JSONField(
        null=True,
        blank=True,
        help_text="Its slowest trainer's logged step of total_steps and the ETA (jobs.follow.progress).",
    )
    queue_boost = models.BooleanField(default=False, help_text="An operator moved it to the front of its priority.")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # A name is taken only while its job is active, so it can be reused at once after a kill.
            models.UniqueConstraint(
                fields=["owner", "name"], condition=Q(state__in=ACTIVE_STATES), name="job_name_unique_while_active"
            )
        ]
        indexes = [
            models.Index(fields=["datacenter", "state"]),
            models.Index(fields=["owner", "name"]),
            # The job list (page and API): a user's newest first, without sorting all their jobs (nor the jobs of one
            # second: the id breaks ties, so a page read backwards is the mirror of one read forwards, core.paging).
            models.Index(fields=["owner", "-created_at", "-id"], name="job_owner_newest"),
            # Its sorts by state, datacenter and start: each part of them read in order (jobs.web.listing.Pages).
            models.Index(fields=["owner", "state", "-created_at", "-id"], name="job_owner_state_newest"),
            models.Index(fields=["owner", "datacenter", "-created_at", "-id"], name="job_owner_dc_newest"),
            models.Index(fields=["owner", "-started_at", "-created_at", "-id"], name="job_owner_started"),
            # The scheduling cycle's first read (jobs.scheduling.cycle.load): each owner's turns among the waiting,
            # read from the index alone (its condition's columns are keys too: SQLite's plan then reads no row).
            models.Index(
                fields=[
                    "datacenter",
                    "state",
                    "owner",
                    "-priority",
                    "-queue_boost",
                    "created_at",
                    "id",
                    "held",
                    "blocked",
                    "admitted_at",
                ],
                condition=Q(state="queued", admitted_at__isnull=True),
                name="job_waiting_turns",
            ),
            # What admitted jobs hold (every cycle and reconcile, a user's quota): a few rows among a datacenter's many.
            # Its condition's columns are keys too: without them SQLite read a user's usage through the job list's
            # index instead, every one of their jobs (40-130 ms of the home page for a user with 100,000).
            models.Index(
                fields=["datacenter", "owner", "released", "admitted_at"],
                condition=Q(admitted_at__isnull=False, released=False),
                name="job_holding",
            ),
            # Each cycle's checks for blocked (jobs.scheduling.dependencies) and preempting jobs: rare among the queued.
            # (Their conditions' columns are keys too: SQLite's planner then prefers them to (datacenter, state).)
            models.Index(
                fields=["datacenter", "state", "blocked"], condition=Q(state="queued", blocked=True), name="job_blocked"
            ),
            models.Index(
                fields=["datacenter", "state", "preempted_at"],
                condition=Q(state="queued", preempted_at__isnull=False),
                name="job_preempting",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.uid}) of {self.owner_id}: {self.state}"

    def restarted_after(self) -> str | None:
        """Why this attempt runs, where the attempt before it failed and was restarted (jobs.follow.restarts keeps
        the failures): "<reason>: <message>", as PADDLECLOUD_RESTART_REASON gives it to the job."""
        for failure in reversed(self.failures or []):
            if isinstance(failure, dict) and failure.get("attempt") == self.attempt - 1:
                return f"{failure.get('reason') or 'Failed'}: {failure.get('message') or ''}"
        return None

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def warnings(self) -> list[dict[str, str]]:
        """What the job's owner should look at although nothing failed (the API's `warnings`)."""
        if self.stalled_at is None or self.state != JobState.RUNNING:
            return []
        since = self.stalled_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        return [{"reason": "Stalled", "message": f"no trainer has written a log line or used CPU since {since}"}]

    @property
    def trainers(self) -> int:
        """Its trainers: an elastic job's as admitted (trainers_now), else the spec's parallelism."""
        return self.trainers_now or int(self.spec["parallelism"])

    @property
    def pservers(self) -> int:
        return int(self.spec["pservers"])

    @property
    def worker_names(self) -> list[str]:
        """Every worker's name, trainers first: what `worker=` of the log API accepts."""
        return worker_names(self.trainers, self.pservers)


class WorkerState(models.TextChoices):
    PENDING = states.PENDING
    RUNNING = states.RUNNING
    SUCCEEDED = states.SUCCEEDED
    FAILED = states.FAILED
    KILLED = states.KILLED


class Worker(models.Model):
    """One pserver or trainer of a job: what `paddlectl get workers` shows."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="workers")
    role = models.CharField(max_length=10, choices=Role.choices)
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=WorkerState.choices, default=WorkerState.PENDING)
    host = models.CharField(max_length=255, blank=True, default="")
    pid = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    restarts = models.PositiveIntegerField(default=0)
    exit_code = models.IntegerField(null=True, blank=True)
    message = models.TextField(blank=True, default="")
    # Sampled by jobs.follow.worker_usage (shape: jobs.engines.usage_samples): the latest sample, and a bounded
    # series of [unix seconds, cpu cores, memory bytes] for the job page's chart. Portal-owned: the job cannot
    # write here.
    usage = models.JSONField(null=True, blank=True, help_text="The latest usage sample (jobs.engines.usage_samples).")
    usage_history = models.JSONField(default=list, blank=True, help_text="[time, cpu cores, memory bytes] points.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["role", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "role", "index"], name="one_worker_per_role_index")]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        return worker_name(self.role, self.index)


class EventKind(models.TextChoices):
    """What happened to a job or one of its workers (its timeline: `paddlectl describe job`, the job page)."""

    SUBMITTED = "Submitted"
    QUEUED = "Queued"  # waiting, with the reason the scheduler gives
    ADMITTED = "Admitted"
    WAITING = "Waiting"  # started but pending, with the engine's reason (Unschedulable, ImagePullBackOff, ...)
    STATE = "State"  # the job moved to another state (the message names it, with its reason)
    PREEMPTED = "Preempted"
    WORKER_STARTED = "WorkerStarted"
    WORKER_RESTARTED = "WorkerRestarted"
    WORKER_EXITED = "WorkerExited"
    WORKER_OOM = "WorkerOOMKilled"
    WORKER_KILLED = "WorkerKilled"
    STALLED = "Stalled"
    DROPPED = "EventsDropped"  # the job reached its bound of events; later ones are not kept


class JobEvent(models.Model):
    """One line of a job's timeline; written by jobs.events only, where the domain decides a change."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    worker = models.CharField(max_length=40, blank=True, default="", help_text="e.g. trainer-0; blank: the job.")
    message = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["time", "id"]
        indexes = [models.Index(fields=["job", "time", "id"], name="job_event_timeline")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.kind} {self.worker}".rstrip()
