"""The queue as users and operators see it: positions, estimated starts and ends (reads only; the operators'
hold/release/front are writes, in jobs.services).

Positions and estimates come from the scheduler's own plan replayed over time (jobs.scheduling.forecast), so what
a user reads is what the coming cycles do, as far as the jobs' expected durations hold. On an `admission: kueue`
datacenter the gate admits at once and Kueue holds the jobs (`pending`): their rows come first, each at its place
in its owner's ClusterQueue, from the engine (capabilities.QueueVisibility, Kueue's visibility API), with the
job's reason and message (Kueue's words), and estimates from the same replay in Kueue's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from datacenters.models import Admission, Datacenter
from jobs.engines import engine_for
from jobs.engines.capabilities import QueueVisibility
from jobs.models import STARTED_STATES, Job, JobState
from jobs.scheduling import cycle, forecast
from jobs.scheduling.forecast import NOWHERE, Place

MAX_ROWS = 1000  # rows one queue answer holds; the rest are counted
OTHERS = "another user"  # the owner shown for other users' jobs

__all__ = ["NOWHERE", "Place", "is_waiting", "place", "queue"]


def _engine_positions(datacenter: Datacenter, jobs: list[Job]) -> dict[str, int]:
    """Job uid -> position of the jobs the cluster's admission (Kueue) holds; {} on a datacenter the gate queues."""
    if datacenter.admission != Admission.KUEUE or not jobs:
        return {}
    engine = engine_for(datacenter)
    return engine.queue_positions(jobs) if isinstance(engine, QueueVisibility) else {}


def _kueue_pending(datacenter: Datacenter) -> list[Job]:
    pending = Job.objects.filter(datacenter=datacenter, state=JobState.PENDING).select_related("owner")
    return list(pending.order_by("created_at", "id")[:MAX_ROWS])


def _kueue_places(datacenter: Datacenter) -> tuple[list[Job], dict[int, Place]]:
    """The jobs Kueue holds, in its order (place in the owner's ClusterQueue, then submission), and their places."""
    if datacenter.admission != Admission.KUEUE:
        return [], {}
    candidates = _kueue_pending(datacenter)
    positions = _engine_positions(datacenter, candidates)
    held = sorted((job for job in candidates if job.uid in positions), key=lambda job: positions[job.uid])
    return held, forecast.kueue_places(datacenter, held, positions)


def is_waiting(job: Job) -> bool:
    """Waiting for admission: by the portal's gate (queued), or by Kueue (pending, in its ClusterQueue)."""
    if job.state == JobState.QUEUED and job.admitted_at is None:
        return True
    return job.state == JobState.PENDING and job.uid in _engine_positions(job.datacenter, [job])


def place(job: Job) -> Place:
    """Where a job stands: a waiting one's place in its datacenter's queue (NOWHERE while held or blocked); a
    started one's expected end."""
    if job.state == JobState.PENDING and is_waiting(job):
        return _kueue_places(job.datacenter)[1].get(job.pk, NOWHERE)
    if job.state in STARTED_STATES or job.state == JobState.SUBMITTING:
        return forecast.running_end(job)
    if not is_waiting(job) or job.held or job.blocked:
        return NOWHERE
    return forecast.places(job.datacenter).get(job.pk, NOWHERE)


@dataclass
class Queue:
    """One datacenter's waiting jobs in admission order (at most MAX_ROWS), and how many there are in all."""

    rows: list[dict[str, Any]]
    count: int

    @property
    def truncated(self) -> bool:
        return self.count > len(self.rows)


def _ordered_ids(datacenter: Datacenter, places: dict[int, Place]) -> tuple[list[int], int]:
    """The waiting jobs' ids to show: the forecast's order, then those no cycle looks at yet (past
    cycle.PER_OWNER of their owner's), then the held; and how many wait in all."""
    ranked = sorted(places, key=lambda job_id: places[job_id].position or 0)[:MAX_ROWS]
    waiting = cycle.unadmitted(datacenter)
    rest = (
        waiting.exclude(pk__in=ranked)
        .order_by("held", "-priority", "-queue_boost", "created_at", "id")
        .values_list("id", flat=True)[: MAX_ROWS - len(ranked)]
    )
    return [*ranked, *rest], waiting.count()


def queue(datacenter: Datacenter, viewer: Any) -> Queue:
    """The queue `viewer` reads: other users' jobs without name or uid, unless the viewer is staff."""
    now = timezone.now()
    held_by_kueue, kueue_places = _kueue_places(datacenter)
    rows = [_row(job, kueue_places.get(job.pk, NOWHERE), viewer, now) for job in held_by_kueue]
    places = forecast.places(datacenter)
    ids, count = _ordered_ids(datacenter, places)
    jobs = Job.objects.select_related("owner").in_bulk(ids)
    for job_id in ids:
        job = jobs.get(job_id)
        if job is not None:  # else admitted and gone, or removed, between the two reads
            rows.append(_row(job, places.get(job_id, NOWHERE), viewer, now))
    return Queue(rows[:MAX_ROWS], count + len(held_by_kueue))


def _row(job: Job, at: Place, viewer: Any, now: Any) -> dict[str, Any]:
    mine = job.owner_id == viewer.pk or getattr(viewer, "is_staff", False)
    return {
        "position": at.position,
        "job": job.name if mine else None,
        "uid": job.uid if mine else None,
        "owner": job.owner.username if mine else OTHERS,
        "priority": job.priority_class,
        "reason": job.reason,
        "message": job.message,
        "waited": round(max((now - job.created_at).total_seconds(), 0.0), 3),
        "requests": {"cpu": float(job.cpu_request), "memory": job.memory_request, "gpu": job.gpu_request},
        "estimated_start": at.estimated_start,
        "estimated_end": at.estimated_end,
        "estimate_basis": at.basis,
    }
