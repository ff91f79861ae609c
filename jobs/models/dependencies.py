"""A job's dependencies (spec `after`): each row says the job starts only once `needs` ended as `condition` asks."""

from __future__ import annotations

from django.db import models


class JobDependency(models.Model):
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="dependencies")
    needs = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="dependents")
    condition = models.CharField(
        max_length=8, help_text="ok: it succeeded; any: it ended at all; failed: it ended and did not succeed."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "needs"], name="one_dependency_per_pair")]

    def __str__(self) -> str:
        return f"{self.job_id} after {self.needs_id}:{self.condition}"
