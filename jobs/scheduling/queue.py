"""The queue as users and operators see it: positions and a rough start estimate (reads only; the operators'
hold/release/front are writes, in jobs.services).

Positions are the scheduler's own order (jobs.scheduling.cycle.positions), so what a user reads is what
the next cycle does. On an `admission: kueue` datacenter the gate admits at once and Kueue holds the jobs
(`pending`): their rows come first, each at its place in its owner's ClusterQueue, from the engine
(capabilities.QueueVisibility, Kueue's visibility API), with the job's reason and message (Kueue's words).
The estimate is deliberately simple (see `Estimator`): a hint, never a promise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count
from django.utils import timezone

from datacenters.models import Admission, Datacenter
from jobs.engines import engine_for
from jobs.engines.capabilities import QueueVisibility
from jobs.models import Job, JobState
from jobs.scheduling import cycle

MAX_ROWS = 1000  # rows one queue answer holds; the rest are counted
HISTORY = 50  # finished jobs whose average wall time the estimate uses
OTHERS = "another user"  # the owner shown for other users' jobs


class Estimator:
    """When a waiting job may start, roughly: now + average wall time x ceil(position / running slots).

    The average is over the datacenter's last HISTORY finished jobs; the slots are the jobs admitted
    now (at least 1). It assumes jobs like the recent ones, ending one batch of "slots" jobs at a time,
    so it ignores sizes, priorities arriving later and fair share: None where no job has finished yet.
    """

    def __init__(self, datacenter: Datacenter) -> None:
        self.now = timezone.now()
        runs = (
            Job.objects.filter(datacenter=datacenter, started_at__isnull=False, finished_at__isnull=False)
            .order_by("-finished_at")
            .values_list("started_at", "finished_at")[:HISTORY]
        )
        seconds = [max((end - start).total_seconds(), 0.0) for start, end in runs if start and end]
        self.average = sum(seconds) / len(seconds) if seconds else None
        self.slots = max(cycle.holding(datacenter).count(), 1)

    def start(self, position: int | None, slots: int | None = None) -> datetime | None:
        """`slots`: the jobs running beside it, where that is not the datacenter's (a Kueue user's own queue)."""
        if self.average is None or position is None:
            return None
        return self.now + timedelta(seconds=self.average * math.ceil(position / max(slots or self.slots, 1)))


@dataclass(frozen=True)
class Place:
    """A waiting job's place: 1-based position (None: held, or past what a cycle looks at) and estimate."""

    position: int | None
    estimated_start: datetime | None


NOWHERE = Place(None, None)


def _engine_positions(datacenter: Datacenter, jobs: list[Job]) -> dict[str, int]:
    """Job uid -> position of the jobs the cluster's admission (Kueue) holds; {} on a datacenter the gate queues."""
    if datacenter.admission != Admission.KUEUE or not jobs:
        return {}
    engine = engine_for(datacenter)
    return engine.queue_positions(jobs) if isinstance(engine, QueueVisibility) else {}


def _running_by_owner(datacenter: Datacenter) -> dict[int, int]:
    """Each owner's running jobs: the slots of their own ClusterQueue, for the estimate of a job Kueue holds (at
    least 1 where none runs: the datacenter's admitted jobs include those Kueue holds, so they are no measure)."""
    running = Job.objects.filter(datacenter=datacenter, state=JobState.RUNNING).values("owner_id")
    return {row["owner_id"]: row["n"] for row in running.annotate(n=Count("id"))}


def _kueue_place(job: Job) -> Place:
    position = _engine_positions(job.datacenter, [job]).get(job.uid) if job.state == JobState.PENDING else None
    if position is None:
        return NOWHERE
    slots = _running_by_owner(job.datacenter).get(job.owner_id, 1)
    return Place(position, Estimator(job.datacenter).start(position, slots))


def is_waiting(job: Job) -> bool:
    """Waiting for admission: by the portal's gate (queued), or by Kueue (pending, in its ClusterQueue)."""
    if job.state == JobState.QUEUED and job.admitted_at is None:
        return True
    return _kueue_place(job) is not NOWHERE


def place(job: Job) -> Place:
    """Where a job stands in its datacenter's queue; NOWHERE unless it waits for admission, not held or blocked."""
    if job.state == JobState.PENDING:
        return _kueue_place(job)
    if not is_waiting(job) or job.held or job.blocked:
        return NOWHERE
    order = cycle.positions(job.datacenter)
    if job.pk not in order:
        return NOWHERE
    position = order.index(job.pk) + 1
    return Place(position, Estimator(job.datacenter).start(position))


@dataclass
class Queue:
    """One datacenter's waiting jobs in admission order (at most MAX_ROWS), and how many there are in all."""

    rows: list[dict[str, Any]]
    count: int

    @property
    def truncated(self) -> bool:
        return self.count > len(self.rows)


def _ordered_ids(datacenter: Datacenter) -> tuple[list[int], set[int], int]:
    """The waiting jobs' ids to show: the scheduler's order, then those no cycle looks at yet (past
    cycle.PER_OWNER of their owner's), then the held; the ranked ones apart; and how many wait in all."""
    ranked = cycle.positions(datacenter)[:MAX_ROWS]
    waiting = cycle.unadmitted(datacenter)
    rest = (
        waiting.exclude(pk__in=ranked)
        .order_by("held", "-priority", "-queue_boost", "created_at", "id")
        .values_list("id", flat=True)[: MAX_ROWS - len(ranked)]
    )
    return [*ranked, *rest], set(ranked), waiting.count()


def _kueue_rows(datacenter: Datacenter, viewer: Any, estimator: Estimator) -> list[dict[str, Any]]:
    """The jobs Kueue holds, in its order: place in the owner's ClusterQueue, then submission."""
    if datacenter.admission != Admission.KUEUE:
        return []
    pending = Job.objects.filter(datacenter=datacenter, state=JobState.PENDING).select_related("owner")
    candidates = list(pending.order_by("created_at", "id")[:MAX_ROWS])
    positions = _engine_positions(datacenter, candidates)
    held = sorted((job for job in candidates if job.uid in positions), key=lambda job: positions[job.uid])
    slots = _running_by_owner(datacenter) if held else {}
    return [_row(job, positions[job.uid], viewer, estimator, slots.get(job.owner_id, 1)) for job in held]


def queue(datacenter: Datacenter, viewer: Any) -> Queue:
    """The queue `viewer` reads: other users' jobs without name or uid, unless the viewer is staff."""
    ids, ranked, count = _ordered_ids(datacenter)
    jobs = Job.objects.select_related("owner").in_bulk(ids)
    estimator = Estimator(datacenter)
    rows = _kueue_rows(datacenter, viewer, estimator)
    count += len(rows)
    position = 0
    for job_id in ids:
        job = jobs.get(job_id)
        if job is None:  # admitted and gone, or removed, between the two reads
            continue
        if job_id in ranked:
            position += 1
        rows.append(_row(job, position if job_id in ranked else None, viewer, estimator))
    return Queue(rows[:MAX_ROWS], count)


def _row(
    job: Job, position: int | None, viewer: Any, estimator: Estimator, slots: int | None = None
) -> dict[str, Any]:
    mine = job.owner_id == viewer.pk or getattr(viewer, "is_staff", False)
    return {
        "position": position,
        "job": job.name if mine else None,
        "uid": job.uid if mine else None,
        "owner": job.owner.username if mine else OTHERS,
        "priority": job.priority_class,
        "reason": job.reason,
        "message": job.message,
        "waited": round(max((estimator.now - job.created_at).total_seconds(), 0.0), 3),
        "requests": {"cpu": float(job.cpu_request), "memory": job.memory_request, "gpu": job.gpu_request},
        "estimated_start": estimator.start(position, slots),
    }
