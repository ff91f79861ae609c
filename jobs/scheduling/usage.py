"""Compute held by a user's admitted jobs (what runs, and what is being stopped), for quota and `GET /api/v1/quota`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum

from datacenters.models import Datacenter
from datacenters.quota import Amounts
from jobs.scheduling.cycle import holding


def compute_in_use(user: Any, datacenter: Datacenter) -> Amounts:
    row = (
        holding(datacenter)
        .filter(owner=user)
        .aggregate(cpu=Sum("cpu_request"), memory=Sum("memory_request"), gpu=Sum("gpu_request"), jobs=Count("id"))
    )
    return Amounts(cpu=row["cpu"] or Decimal(0), memory=row["memory"] or 0, gpu=row["gpu"] or 0, jobs=row["jobs"])
