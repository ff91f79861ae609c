"""The operators' health page: each datacenter's capacity, use, jobs, last reconcile, engine errors; heartbeats."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from datacenters.capacity import capacity
from datacenters.models import Datacenter
from health.models import WorkerHeartbeat
from jobs.follow import reconcile_runs
from jobs.models import Job, JobState
from jobs.scheduling.cycle import holding

MAX_DATACENTERS = 50
MAX_HEARTBEATS = 100
STALE_BEATS = 3  # a worker that missed this many heartbeats in a row is marked stale


def _datacenter(datacenter: Datacenter) -> dict[str, Any]:
    held = holding(datacenter).aggregate(cpu=Sum("cpu_request"), memory=Sum("memory_request"),
                                         gpu=Sum("gpu_request"))
    counts = Job.objects.filter(datacenter=datacenter).aggregate(
        running=Count("id", filter=Q(state__in=[JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING])),
        queued=Count("id", filter=Q(state=JobState.QUEUED)),
    )
    return {"datacenter": datacenter, "capacity": capacity(datacenter), "held": held, **counts,
            "reconcile": reconcile_runs.last(datacenter.pk), "errors": reconcile_runs.engine_errors(datacenter.pk)}


@login_required
def health_page(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("the health page is for operators")
    stale_after = timedelta(seconds=STALE_BEATS * settings.CELERY_HEARTBEAT_SECONDS)
    now = timezone.now()
    beats = [{"row": row, "stale": now - row.last_seen > stale_after}
             for row in WorkerHeartbeat.objects.order_by("-last_seen")[:MAX_HEARTBEATS]]
    datacenters = [_datacenter(dc) for dc in Datacenter.objects.order_by("name")[:MAX_DATACENTERS]]
    context = {"datacenters": datacenters, "beats": beats, "stale_after": stale_after.total_seconds(),
               "any_errors": any(d["errors"] for d in datacenters), "max_errors": reconcile_runs.MAX_ERRORS}
    return render(request, "health/page.html", context)
