"""An experiment (a named search over one job template) and its trials (one job each, made as the search asks)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F


class ExperimentState(models.TextChoices):
    RUNNING = "running"  # trials wait, run or are still to be submitted
    SUCCEEDED = "succeeded"  # every trial ended and at least one succeeded
    FAILED = "failed"  # every trial ended and none succeeded
    KILLED = "killed"


class ExperimentQuerySet(models.QuerySet["Experiment"]):
    def named(self, owner_id: int | None, ref: str) -> Experiment | None:
        """The owner's experiment `ref`: a uid, or a name (the newest of that name); None where it has none."""
        mine = self.filter(owner_id=owner_id).select_related("owner", "datacenter")
        return mine.filter(uid=ref).first() or mine.filter(name=ref).order_by("-created_at", "-id").first()


class Experiment(models.Model):
    uid = models.CharField(max_length=60, unique=True)
    name = models.CharField(max_length=40)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="experiments")
    datacenter = models.ForeignKey("datacenters.Datacenter", on_delete=models.CASCADE, related_name="experiments")
    template = models.JSONField(help_text="The job spec every trial is made from (its params and name aside).")
    sweep = models.JSONField(help_text="The sweep as submitted: params, search, max_trials, parallel, seed, metric.")
    state = models.CharField(max_length=12, choices=ExperimentState.choices, default=ExperimentState.RUNNING)
    message = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    then_job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The sweep's `then` job, submitted once it succeeded (the best trial's params and checkpoint).",
    )  # fmt: skip

    objects = ExperimentQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "name", "-created_at"], name="experiment_by_owner_name")]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], condition=models.Q(state="running"), name="one_running_experiment_per_name"
            )
        ]

    def __str__(self) -> str:
        return self.uid

    @property
    def goal(self) -> str:
        return str(((self.sweep or {}).get("metric") or {}).get("goal") or "minimize")

    @property
    def metric(self) -> str | None:
        name = ((self.sweep or {}).get("metric") or {}).get("name")
        return str(name) if name else None

    def trials_by_metric(self) -> models.QuerySet[Trial]:
        """Its trials, the best first by its metric (minimize unless it says maximize), then by index."""
        best = F("best").desc(nulls_last=True) if self.goal == "maximize" else F("best").asc(nulls_last=True)
        return self.trials.order_by(best, "index")


class Trial(models.Model):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="trials")
    index = models.PositiveIntegerField()
    params = models.JSONField()
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(
        max_length=20,
        default="waiting",
        help_text="waiting (not submitted yet), refused, removed (its job was), stopped (by ASHA), or its job's state.",
    )
    message = models.CharField(max_length=500, blank=True, default="")
    best = models.FloatField(null=True, blank=True, help_text="The best value of the experiment's metric it logged.")
    last = models.FloatField(null=True, blank=True, help_text="The last value of the metric it logged.")
    steps = models.PositiveBigIntegerField(null=True, blank=True, help_text="The last step it logged the metric at.")
    cursor = models.CharField(max_length=20, blank=True, default="", help_text="How far its metrics file was read.")
    rungs = models.JSONField(default=dict, blank=True, help_text="ASHA: its metric at each rung it passed.")
    checkpoints_pruned = models.BooleanField(
        default=False, help_text="The keep policy was applied to its checkpoints (once it ended): the others are gone."
    )

    class Meta:
        ordering = ["experiment_id", "index"]
        constraints = [models.UniqueConstraint(fields=["experiment", "index"], name="one_trial_per_index")]

    def __str__(self) -> str:
        return f"{self.experiment_id}/{self.index}"
