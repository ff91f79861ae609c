"""What the scheduler keeps: priority classes, the usage ledger, and each user's decayed fair-share usage."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.validators import validate_dns_label


class PriorityClass(models.Model):
    """A priority operators define (`low`, `normal`, `high` to start with): higher values are admitted first."""

    name = models.CharField(max_length=40, unique=True, validators=[validate_dns_label])
    value = models.IntegerField(help_text="Higher is admitted first; `normal` is the default class.")
    open_to_all = models.BooleanField(
        default=False, help_text="Every user may submit with it; otherwise staff and those listed below."
    )
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    description = models.CharField(max_length=200, blank=True)
    may_opt_out = models.BooleanField(
        default=True, help_text="Its jobs may ask not to be preempted (`-no-preempt`); staff's always may."
    )

    class Meta:
        ordering = ["-value"]
        verbose_name_plural = "priority classes"

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"


class UsageRecord(models.Model):
    """The ledger: what one worker of one job held, and for how long. Written once, when the job is released.

    Kept when the job row is removed (`kill -rm`): accounting outlives jobs, so it names them, not points at them.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    datacenter = models.ForeignKey("datacenters.Datacenter", on_delete=models.CASCADE, related_name="+")
    job_uid = models.CharField(max_length=48)
    job_name = models.CharField(max_length=40)
    worker = models.CharField(max_length=40)
    attempt = models.PositiveIntegerField(default=1)
    cpu = models.DecimalField(max_digits=12, decimal_places=3)
    memory = models.BigIntegerField()
    gpu = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(db_index=True)
    # What it used, where the engine measured it (the local engine's cgroups; its last run if restarted).
    cpu_seconds_used = models.FloatField(null=True, blank=True)
    peak_memory = models.BigIntegerField(null=True, blank=True, help_text="Bytes.")

    class Meta:
        ordering = ["-ended_at"]
        constraints = [
            models.UniqueConstraint(fields=["job_uid", "attempt", "worker"], name="one_record_per_attempt_worker")
        ]
        indexes = [models.Index(fields=["datacenter", "owner", "ended_at"])]

    def __str__(self) -> str:
        return f"{self.job_uid}/{self.worker}"

    @property
    def seconds(self) -> float:
        return max((self.ended_at - self.started_at).total_seconds(), 0.0)


class FairShareUsage(models.Model):
    """A user's past usage in one datacenter, decayed to `as_of` by the datacenter's half-life (resource-seconds)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    datacenter = models.ForeignKey("datacenters.Datacenter", on_delete=models.CASCADE, related_name="+")
    cpu_seconds = models.FloatField(default=0)
    memory_seconds = models.FloatField(default=0)  # byte-seconds
    gpu_seconds = models.FloatField(default=0)
    as_of = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "datacenter"], name="one_fair_share_per_user")]

    def __str__(self) -> str:
        return f"fair share of {self.owner_id} in {self.datacenter_id}"


class SchedulingPolicy(models.Model):
    """How the portal's scheduler of one datacenter decides: its order, backfill and victim strategies, by name,
    and their settings. Names and settings are checked by the strategies themselves (jobs.scheduling.strategies)
    where an operator saves them (the admin); a datacenter without a row uses the defaults."""

    datacenter = models.OneToOneField(
        "datacenters.Datacenter", on_delete=models.CASCADE, related_name="scheduling_policy"
    )
    order = models.CharField(max_length=40, default="fair-share", help_text="Which waiting job goes first.")
    backfill = models.CharField(
        max_length=40, default="reserve", help_text="What a job blocked by capacity holds against the jobs after it."
    )
    victims = models.CharField(
        max_length=40, default="least-loss", help_text="Which running jobs a waiting one of higher priority stops."
    )
    settings = models.JSONField(default=dict, blank=True, help_text="The chosen strategies' settings, by name.")

    class Meta:
        verbose_name_plural = "scheduling policies"

    def __str__(self) -> str:
        return f"{self.order}, {self.backfill}, {self.victims}"
