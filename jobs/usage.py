"""Compute in use by a user's active jobs, for quota checks and `GET /api/v1/quota`."""

from __future__ import annotations

from typing import Any

from datacenters.models import Datacenter
from datacenters.quota import Amounts
from jobs.models import ACTIVE_STATES, Job
from jobs.spec import requested


def compute_in_use(user: Any, datacenter: Datacenter) -> Amounts:
    total = Amounts()
    for job_spec in Job.objects.filter(owner=user, datacenter=datacenter, state__in=ACTIVE_STATES).values_list(
        "spec", flat=True
    ):
        cpu, memory, gpu = requested(job_spec)
        total = total + Amounts(cpu=cpu, memory=memory, gpu=gpu, jobs=1)
    return total
