"""Datacenter (engine, cluster credentials, storage, defaults) and per-user Quota overrides."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.module_loading import import_string

from core.crypto import EncryptedTextField
from core.errors import Invalid
from core.validators import (
    validate_cpu_quantity,
    validate_dns_label,
    validate_memory_quantity,
    validate_storage_quantity,
)

# The engine table, beside `Datacenter.engine`: each engine's name and where its classes live. Classes are
# named by dotted path and imported on first use (import_string): the engines live in the jobs app, a floor
# up, and the kubernetes engine imports the kubernetes client, which costs most of a second that the
# portal's processes must not pay at start.


class Engine(models.TextChoices):
    """The engine choices of a datacenter: the keys of ENGINES below."""

    LOCAL = "local", "local (processes on the worker's host)"
    KUBERNETES = "kubernetes", "Kubernetes"


class Admission(models.TextChoices):
    """Who decides when a datacenter's waiting jobs start."""

    PORTAL = "portal", "the portal's scheduler (queues, fair share, priorities, preemption)"
    KUEUE = "kueue", "Kueue in the cluster (needs Kueue and JobSet installed; each job is one JobSet)"


class EngineRules(Protocol):
    """What an engine requires of a datacenter and a job spec (jobs/engines/rules.py is the base the engines extend)."""

    admissions: tuple[str, ...]  # the Admission choices the engine can run

    @classmethod
    def validate_datacenter(cls, datacenter: Datacenter) -> dict[str, str]: ...

    @classmethod
    def check_spec(cls, datacenter: Datacenter, spec: dict[str, Any]) -> None: ...

    @classmethod
    def check_builds(cls, datacenter: Datacenter) -> None: ...

    @classmethod
    def prepare_new(cls, datacenter: Datacenter) -> None: ...

    @classmethod
    def host_report(cls) -> str: ...

    @classmethod
    def detect_gpus(cls) -> list[str]: ...

    @classmethod
    def host_capacity(cls, datacenter: Datacenter) -> tuple[Decimal | None, int | None, int | None]: ...


@dataclass(frozen=True)
class EngineEntry:
    engine: str  # the Engine class: starts, watches and stops jobs
    rules: str  # the EngineRules class: what the engine requires of a datacenter and a job spec (light)


ENGINES: dict[str, EngineEntry] = {
    Engine.LOCAL: EngineEntry("jobs.engines.local.engine.LocalEngine", "jobs.engines.local.rules.LocalRules"),
    Engine.KUBERNETES: EngineEntry(
        "jobs.engines.kubernetes.engine.KubernetesEngine", "jobs.engines.kubernetes.rules.KubernetesRules"
    ),
}
assert set(ENGINES) == set(Engine.values), "every engine choice has one entry in ENGINES"


def rules_for(engine_name: str) -> type[EngineRules]:
    """The rules of the engine named `engine_name` (a datacenter's `engine`)."""
    rules: type[EngineRules] = import_string(ENGINES[engine_name].rules)
    return rules


class StorageKind(models.TextChoices):
    LOCAL = "local", "local directory (embedded engine)"
    HOSTPATH = "hostpath", "hostPath on every node"
    NFS = "nfs", "NFS"
    CEPHFS = "cephfs", "CephFS"
    PVC = "pvc", "existing PersistentVolumeClaim"


def validate_prefix(value: str) -> None:
    # The prefix is joined to a user name to make a namespace; it must be a label start.
    if value:
        validate_dns_label(value.rstrip("-") or "x", max_length=20)


class DatacenterQuerySet(models.QuerySet["Datacenter"]):
    def usable_by(self, user: settings.AUTH_USER_MODEL) -> DatacenterQuerySet:  # type: ignore[name-defined]
        """Enabled datacenters this user may submit to (operators see every enabled one)."""
        enabled = self.filter(enabled=True)
        if getattr(user, "is_staff", False):
            return enabled
        return enabled.filter(Q(all_users=True) | Q(allowed_users=user)).distinct()


class Datacenter(models.Model):
    name = models.CharField(
        max_length=40,
        unique=True,
        validators=[validate_dns_label],
        help_text="DNS-safe: lowercase letters, digits and '-'. Appears in /pfs/<name>/... paths.",
    )
    description = models.CharField(max_length=200, blank=True)
    engine = models.CharField(max_length=20, choices=Engine.choices, default=Engine.KUBERNETES)
    enabled = models.BooleanField(default=True)
    all_users = models.BooleanField(default=True, help_text="Every user may use it; otherwise only those listed.")
    allowed_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="datacenters")

    # Cluster credentials (engine kubernetes).
    in_cluster = models.BooleanField(
        default=False, help_text="Use the portal pod's service account instead of a kubeconfig."
    )
    kubeconfig = EncryptedTextField(blank=True, help_text="Stored encrypted; never shown again after saving.")
    kube_context = models.CharField(max_length=200, blank=True)
    namespace_prefix = models.CharField(
        max_length=20,
        default="paddle-",
        blank=True,
        validators=[validate_prefix],
        help_text="Each user's namespace is this prefix + the DNS-safe user name.",
    )
    admission = models.CharField(
        max_length=10,
        choices=Admission.choices,
        default=Admission.PORTAL,
        help_text="portal: the portal's scheduler starts jobs, each a Service, a StatefulSet of pservers and a Job "
        "of trainers. kueue (the cluster must run Kueue and JobSet): every job is one suspended JobSet in the "
        "user's LocalQueue, and Kueue admits it whole against the user's ClusterQueue (their quota).",
    )

    # Storage: where the portal mounts it, and how pods mount the same filesystem.
    storage_kind = models.CharField(max_length=20, choices=StorageKind.choices, default=StorageKind.LOCAL)
    storage_root = models.CharField(
        max_length=500, help_text="Absolute path where the portal and workers see this datacenter's storage."
    )
    public_path = models.CharField(
        max_length=200, default="public", help_text="Read-only public area, relative to the storage root."
    )
    host_path = models.CharField(max_length=500, blank=True, help_text="hostPath: the directory on every node.")
    nfs_server = models.CharField(max_length=200, blank=True)
    nfs_path = models.CharField(max_length=500, blank=True)
    cephfs_monitors = models.CharField(max_length=500, blank=True, help_text="Comma-separated host:port list.")
    cephfs_user = models.CharField(max_length=100, blank=True, default="admin")
    cephfs_secret_name = models.CharField(max_length=253, blank=True)
    cephfs_path = models.CharField(max_length=500, blank=True, default="/")
    pvc_name = models.CharField(max_length=253, blank=True)

    # Local engine: the sandbox every job process runs in, and the host's GPUs jobs are given.
    run_without_sandbox = models.BooleanField(
        default=False,
        help_text="Local engine only: run jobs without the bubblewrap sandbox where the host cannot create "
        "one. Jobs then run as the worker's OS user and see its files: trusted users only.",
    )
    gpus = models.JSONField(
        default=list,
        blank=True,
        help_text='Local engine only: the host GPUs jobs may be given, as a JSON list of indexes such as ["0", "1"]. '
        "Filled from `nvidia-smi -L` when the datacenter is created.",
    )

    # What every job may use of what the host or cluster shares (issue: isolation).
    job_egress = models.BooleanField(
        default=True,
        help_text="Jobs may open connections to the outside world (pip, datasets). Never to the host's own "
        "services, the portal's, or other jobs: each job has a network of its own either way.",
    )
    wait_for_isolation = models.BooleanField(
        default=True,
        help_text="Kubernetes: a job's code starts only once its pod's NetworkPolicies are in force (the "
        "enforcer programs a new pod's rules seconds after it starts; until then the pod reaches the node and "
        "other namespaces). Turn off only where the cluster enforces no NetworkPolicies: there every job would "
        "fail after a minute.",
    )
    kubelet_port = models.PositiveIntegerField(
        default=10250,
        validators=[MinValueValidator(1), MaxValueValidator(65535)],
        help_text="Kubernetes: the port every node's kubelet listens on. While a job's pod can still connect "
        "to its node there, its NetworkPolicies are not in force yet.",
    )
    job_pids_limit = models.PositiveIntegerField(
        default=1024,
        validators=[MinValueValidator(16), MaxValueValidator(1_000_000)],
        help_text="Processes and threads one worker (pserver or trainer) may hold at once.",
    )
    user_pids_limit = models.PositiveIntegerField(
        default=8192,
        validators=[MinValueValidator(16), MaxValueValidator(4_194_304)],
        help_text="Local engine: processes and threads all of one user's workers on one host may hold at once "
        "(a cgroup above the user's workers; each job's uid is bounded to the same by RLIMIT_NPROC). Keep it "
        "well under the host's kernel.pid_max (32,768 by default) divided by the users who run at once.",
    )
    job_log_limit = models.CharField(
        max_length=20,
        default="256Mi",
        validators=[validate_storage_quantity],
        help_text="Bytes of one worker's log kept on disk; past it the head and the end are kept and the "
        "log says how much was dropped between them.",
    )

    # Job defaults.
    cpu_image = models.CharField(max_length=300, default="paddlepaddle/paddle:3.0.0")
    gpu_image = models.CharField(max_length=300, default="paddlepaddle/paddle:3.0.0-gpu-cuda11.8-cudnn8.9-trt8.6")
    pending_timeout = models.PositiveIntegerField(default=600, help_text="Seconds a job may stay pending.")
    stall_timeout = models.PositiveIntegerField(
        default=1800,
        validators=[MaxValueValidator(7 * 86400)],
        help_text="Seconds without a trainer's log line before a running job is marked Stalled, unless its spec "
        "says (stall_timeout); 0: off.",
    )

    # In-cluster image builds (kubernetes engine; images/).
    builder_image = models.CharField(
        max_length=300,
        blank=True,
        help_text="The image builder Jobs run: a Kaniko executor (tools/k8s/build-builder.sh packs one). "
        "Empty: in-cluster builds are off in this datacenter.",
    )
    builder_ca = models.TextField(
        blank=True,
        max_length=100_000,
        help_text="PEM certificates the builder trusts besides its own (a private registry's CA), for pulling "
        "base images and pushing results.",
    )
    finished_ttl = models.PositiveIntegerField(
        default=86400, help_text="Seconds finished jobs' cluster objects are kept (logs are archived first)."
    )

    # Default quotas for every user of this datacenter (a user's Quota row overrides any of them).
    default_cpu = models.CharField(max_length=20, default="16", validators=[validate_cpu_quantity])
    default_memory = models.CharField(max_length=20, default="64Gi", validators=[validate_memory_quantity])
    default_gpu = models.PositiveIntegerField(default=0)
    default_jobs = models.PositiveIntegerField(
        default=10, help_text="Jobs running at once (waiting ones: max_queued_jobs)."
    )
    default_storage = models.CharField(max_length=20, default="100Gi", validators=[validate_storage_quantity])
    default_storage_files = models.PositiveIntegerField(default=1_000_000)

    # What an account made by signup gets here (datacenters.newcomers): its Quota row, made at signup with these
    # values (blank: that resource's default above). Small, so accounts made by strangers multiply little.
    new_user_cpu = models.CharField(
        max_length=20, blank=True, default="2", validators=[validate_cpu_quantity],
        help_text="Cores an account made by signup may hold here (its quota row; blank: the default quota's).",
    )  # fmt: skip
    new_user_memory = models.CharField(
        max_length=20, blank=True, default="8Gi", validators=[validate_memory_quantity],
        help_text="Memory of an account made by signup (blank: the default quota's).",
    )  # fmt: skip
    new_user_gpu = models.PositiveIntegerField(
        null=True, blank=True, default=0, help_text="GPUs of an account made by signup (blank: the default quota's)."
    )
    new_user_jobs = models.PositiveIntegerField(
        null=True, blank=True, default=2,
        help_text="Running jobs of an account made by signup (blank: the default quota's).",
    )  # fmt: skip
    new_user_storage = models.CharField(
        max_length=20, blank=True, default="10Gi", validators=[validate_storage_quantity],
        help_text="Storage of an account made by signup (blank: the default quota's).",
    )  # fmt: skip

    # The scheduler (jobs/scheduling): what all running jobs together may hold, and how it shares it out.
    capacity_cpu = models.CharField(
        max_length=20, blank=True, validators=[validate_cpu_quantity],
        help_text="Cores all running jobs together may hold. Blank: the host's cores (local engine); unbounded on "
        "Kubernetes, whose own scheduler places pods.",
    )  # fmt: skip
    capacity_memory = models.CharField(
        max_length=20, blank=True, validators=[validate_memory_quantity],
        help_text="Memory all running jobs together may hold. Blank: the host's memory (local); unbounded on "
        "Kubernetes.",
    )  # fmt: skip
    capacity_gpu = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs all running jobs may hold. Blank: the GPUs listed above (local)."
    )
    max_queued_jobs = models.PositiveIntegerField(
        default=100, validators=[MaxValueValidator(10_000)], help_text="Jobs one user may have waiting at once."
    )
    fair_share_half_life = models.PositiveIntegerField(
        default=7 * 24 * 3600, validators=[MinValueValidator(60)],
        help_text="Seconds after which past usage counts half in the fair share (Slurm's PriorityDecayHalfLife).",
    )  # fmt: skip
    preemption_delay = models.PositiveIntegerField(
        default=60, help_text="Seconds a job waits before it may preempt running jobs of lower priority."
    )
    preemption_grace = models.PositiveIntegerField(
        default=30, validators=[MaxValueValidator(3600)],
        help_text="Seconds a preempted job's workers have between SIGTERM (to save a checkpoint) and SIGKILL.",
    )  # fmt: skip
    elastic_grow_after = models.PositiveIntegerField(
        default=60,
        help_text="Seconds an elastic job runs before it may grow into freed room (each growth restarts it from its "
        "checkpoint with more trainers).",
    )
    reserve_after = models.PositiveIntegerField(
        default=600,
        help_text="Seconds the first waiting job may wait before it holds a reservation: then smaller jobs start "
        "ahead of it only with what it does not need.",
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DatacenterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if not Path(self.storage_root or "").is_absolute():
            errors["storage_root"] = "must be an absolute path"
        if self.engine in ENGINES:  # an unknown one is refused by the field's choices
            rules = rules_for(self.engine)
            errors.update(rules.validate_datacenter(self))
            if self.admission not in rules.admissions:
                errors["admission"] = f"the {self.engine} engine supports: {', '.join(rules.admissions)}"
        if self.public_path.startswith("/") or ".." in Path(self.public_path).parts:
            errors["public_path"] = "must be relative to the storage root, without '..'"
        if errors:
            raise ValidationError(errors)

    def user_may_use(self, user: object) -> bool:
        return Datacenter.objects.usable_by(user).filter(pk=self.pk).exists()


def usable_datacenter(user: Any, name: str, field: str = "datacenter") -> Datacenter:
    """The datacenter named, if this user may use it; else refused (Invalid) naming the field."""
    datacenter = Datacenter.objects.usable_by(user).filter(name=name).first()
    if datacenter is None:
        names = ", ".join(Datacenter.objects.usable_by(user).values_list("name", flat=True)) or "none"
        raise Invalid(f"unknown datacenter {name!r}; you may use: {names}", field)
    return datacenter


class Quota(models.Model):
    """A user's limits in one datacenter; an empty field means the datacenter's default."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quotas")
    datacenter = models.ForeignKey(Datacenter, on_delete=models.CASCADE, related_name="quotas")
    cpu = models.CharField(max_length=20, blank=True, validators=[validate_cpu_quantity])
    memory = models.CharField(max_length=20, blank=True, validators=[validate_memory_quantity])
    gpu = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(0)])
    jobs = models.PositiveIntegerField(
        null=True, blank=True, help_text="Jobs running at once (waiting ones: max_queued_jobs)."
    )
    storage = models.CharField(max_length=20, blank=True, validators=[validate_storage_quantity])
    storage_files = models.PositiveIntegerField(null=True, blank=True)
    weight = models.DecimalField(
        max_digits=8, decimal_places=3, default=1, validators=[MinValueValidator(Decimal("0.001"))],
        help_text="Fair-share weight: a user of weight 2 is entitled to twice the share of a user of weight 1.",
    )  # fmt: skip
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "datacenter"], name="one_quota_per_user_datacenter")]
        ordering = ["datacenter__name", "user__username"]

    def __str__(self) -> str:
        return f"quota of {self.user} in {self.datacenter}"


class TeamQuota(models.Model):
    """A team (a Django group) in one datacenter: what it is guaranteed, whether it borrows, its fair-share weight.

    Its members' jobs run within `cpu`/`memory`/`gpu` whatever others do (the scheduler takes back what other
    teams borrowed, by preemption); with `may_borrow` they also run on what other teams leave idle, and give
    it back when those teams' jobs wait. Each member's own Quota still applies inside the team's.
    """

    group = models.ForeignKey("auth.Group", on_delete=models.CASCADE, related_name="team_quotas")
    datacenter = models.ForeignKey(Datacenter, on_delete=models.CASCADE, related_name="team_quotas")
    cpu = models.CharField(max_length=20, default="0", validators=[validate_cpu_quantity])
    memory = models.CharField(max_length=20, default="0", validators=[validate_memory_quantity])
    gpu = models.PositiveIntegerField(default=0)
    may_borrow = models.BooleanField(default=True, help_text="Run on what other teams leave idle, until they need it.")
    weight = models.DecimalField(
        max_digits=8, decimal_places=3, default=1, validators=[MinValueValidator(Decimal("0.001"))],
        help_text="Fair-share weight of the team against other teams.",
    )  # fmt: skip

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "datacenter"], name="one_team_quota_per_datacenter")]
        ordering = ["datacenter__name", "group__name"]

    def __str__(self) -> str:
        return f"team {self.group} in {self.datacenter}"


def team_of(user: Any, datacenter: Datacenter) -> TeamQuota | None:
    """The user's team in `datacenter`: of their groups with a team quota there, the first by name."""
    teams = TeamQuota.objects.filter(datacenter=datacenter, group__user=user).select_related("group")
    found: TeamQuota | None = teams.order_by("group__name").first()
    return found
