"""Heartbeat task, run by beat: proves the broker, a worker and the database all work together."""

from __future__ import annotations

import socket

from celery import shared_task
from django.db.models import F
from django.utils import timezone

from health.models import WorkerHeartbeat


@shared_task(name="portal.heartbeat", ignore_result=True)
def heartbeat(hostname: str | None = None) -> None:
    name = hostname or socket.gethostname()
    now = timezone.now()
    # Idempotent upsert: one row per host, counted with F() so concurrent beats never lose one.
    row, created = WorkerHeartbeat.objects.get_or_create(hostname=name, defaults={"last_seen": now, "beats": 1})
    if not created:
        WorkerHeartbeat.objects.filter(pk=row.pk).update(last_seen=now, beats=F("beats") + 1)
