"""What a local datacenter's jobs run in and on: the runtimes operators register, and the GPUs trainers hold."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from core.validators import validate_dns_label
from jobs.models.job import Job


def validate_runtime_name(value: str) -> None:
    validate_dns_label(value, max_length=40)


class Runtime(models.Model):
    """A runtime environment an operator registered for a local datacenter (what `-image NAME` picks).

    Every local datacenter also has the built-in `default` runtime (jobs.engines.local.runtimes.DEFAULT_REQUIREMENTS);
    the client package is always installed on top of a runtime's requirements.
    """

    datacenter = models.ForeignKey("datacenters.Datacenter", on_delete=models.CASCADE, related_name="runtimes")
    name = models.CharField(
        max_length=40,
        validators=[validate_runtime_name],
        help_text="What users pass as `-image NAME`. DNS-safe; `default` is the built-in Paddle runtime.",
    )
    requirements = models.TextField(
        max_length=20000,
        help_text="requirements.txt of the base environment, e.g. paddlepaddle==3.0.0 and protobuf<7. "
        "Built once per host on first use; the client package is added.",
    )
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["datacenter__name", "name"]
        constraints = [models.UniqueConstraint(fields=["datacenter", "name"], name="one_runtime_name_per_datacenter")]

    def __str__(self) -> str:
        return f"{self.name} ({self.datacenter_id})"

    def clean(self) -> None:
        if self.name == "default":
            raise ValidationError({"name": "`default` is the built-in runtime; choose another name"})


class GpuAssignment(models.Model):
    """One host GPU held by one trainer of a running job; the unique constraint makes handing out race-free."""

    datacenter = models.ForeignKey("datacenters.Datacenter", on_delete=models.CASCADE, related_name="+")
    gpu = models.CharField(max_length=40, help_text="The GPU's index as `nvidia-smi -L` lists it.")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="gpus")
    trainer = models.PositiveIntegerField()

    class Meta:
        ordering = ["datacenter_id", "gpu"]
        constraints = [models.UniqueConstraint(fields=["datacenter", "gpu"], name="one_job_per_gpu")]

    def __str__(self) -> str:
        return f"GPU {self.gpu} -> {self.job_id}/trainer-{self.trainer}"
