"""The ledger: what each worker held (cpu, memory, gpu x seconds), written once as its job is released.

The fair share reads it through `FairShareUsage`, one row per user and datacenter that holds their past
usage decayed by the datacenter's half-life: adding a record decays the row to now and adds the record,
so a scheduling cycle reads one row per waiting user, however long the history.
"""

from __future__ import annotations

import math
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from paddlecloud.contract.spec import worker_requested
from paddlecloud.contract.states import PSERVER

from datacenters.models import Datacenter
from jobs.models import FairShareUsage, Job, UsageRecord


def decay(value: float, since: datetime, now: datetime, half_life: float) -> float:
    """`value` measured at `since`, as it counts at `now`."""
    elapsed = max((now - since).total_seconds(), 0.0)
    return value * math.pow(0.5, elapsed / max(half_life, 1.0))


Span = tuple[datetime | None, datetime | None]


def record(
    job: Job,
    measured: dict[str, tuple[float | None, int | None]] | None = None,
    now: datetime | None = None,
    spans: dict[str, Span] | None = None,
) -> list[UsageRecord]:
    """Write the ledger of a released job (once: a second call finds its records and adds nothing).

    measured: what each worker used, by name (capabilities.UsageMeter), where the engine knows it.
    spans: when each worker held its resources, by name (capabilities.WorkerSpans): the pods' own start and end
    on Kubernetes; otherwise, as on the local engine, from the worker's start to the job's end."""
    now = now or timezone.now()
    ended = job.finished_at or now
    records = []
    for worker in job.workers.all():
        span_start, span_end = (spans or {}).get(worker.name, (None, None))
        started = span_start or worker.started_at
        if started is None:  # never ran: it held nothing
            continue
        cpu, memory, gpu = worker_requested(job.spec, pserver=worker.role == PSERVER)
        cpu_used, peak = (measured or {}).get(worker.name, (None, None))
        records.append(
            UsageRecord(
                owner_id=job.owner_id, datacenter_id=job.datacenter_id, job_uid=job.uid, job_name=job.name,
                worker=worker.name, attempt=job.attempt, cpu=cpu, memory=memory, gpu=gpu, started_at=started,
                ended_at=max(span_end or ended, started), cpu_seconds_used=cpu_used, peak_memory=peak,
            )
        )  # fmt: skip
    with transaction.atomic():
        if UsageRecord.objects.filter(job_uid=job.uid, attempt=job.attempt).exists():
            return []
        UsageRecord.objects.bulk_create(records)
        _add_to_share(job.owner_id, job.datacenter, records, now)
    return records


def _add_to_share(owner_id: int, datacenter: Datacenter, records: list[UsageRecord], now: datetime) -> None:
    half_life = float(datacenter.fair_share_half_life)
    FairShareUsage.objects.get_or_create(owner_id=owner_id, datacenter=datacenter, defaults={"as_of": now})
    row = FairShareUsage.objects.select_for_update().get(owner_id=owner_id, datacenter=datacenter)
    cpu, memory, gpu = (
        decay(v, row.as_of, now, half_life) for v in (row.cpu_seconds, row.memory_seconds, row.gpu_seconds)
    )
    for item in records:
        # Each second held counts as of when it was held: a long job's early hours have partly decayed.
        seconds = item.seconds
        middle = item.started_at + (item.ended_at - item.started_at) / 2
        weight = decay(1.0, middle, now, half_life)
        cpu += float(item.cpu) * seconds * weight
        memory += float(item.memory) * seconds * weight
        gpu += float(item.gpu) * seconds * weight
    FairShareUsage.objects.filter(pk=row.pk).update(cpu_seconds=cpu, memory_seconds=memory, gpu_seconds=gpu, as_of=now)
