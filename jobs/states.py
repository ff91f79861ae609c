"""State transitions as conditional UPDATEs: whoever moves a job first wins; a repeat does nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.models import TERMINAL_STATES, Job, JobState, Worker

# Which states each state may be entered from (the state machine, in one place).
ALLOWED_FROM: dict[JobState, tuple[JobState, ...]] = {
    JobState.QUEUED: (),
    JobState.SUBMITTING: (JobState.QUEUED, JobState.SUBMITTING),
    JobState.PENDING: (JobState.SUBMITTING,),
    JobState.RUNNING: (JobState.SUBMITTING, JobState.PENDING),
    JobState.SUCCEEDED: (JobState.PENDING, JobState.RUNNING),
    JobState.FAILED: (JobState.QUEUED, JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING),
    JobState.KILLED: (JobState.QUEUED, JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING),
}


def transition(job_id: int, to: JobState, *, from_states: Iterable[JobState] | None = None, **fields: Any) -> bool:
    """Move the job to `to` if it is in one of `from_states` (default: every state allowed); True if moved."""
    allowed = tuple(from_states) if from_states is not None else ALLOWED_FROM[to]
    allowed = tuple(s for s in allowed if s in ALLOWED_FROM[to])
    now = timezone.now()
    if to in TERMINAL_STATES:
        fields.setdefault("finished_at", now)
    if to == JobState.RUNNING:
        fields.setdefault("started_at", now)
    if to == JobState.SUCCEEDED:
        # A job fast enough to end between two polls was never seen running, yet it ran: its start is
        # when its first worker started (else now), so the timeline and the duration have one.
        workers = Worker.objects.filter(job=OuterRef("pk"), started_at__isnull=False).order_by("started_at")
        first_start = Subquery(workers.values("started_at")[:1])
        fields.setdefault("started_at", Coalesce(F("started_at"), first_start, Value(now)))
    moved = bool(Job.objects.filter(pk=job_id, state__in=allowed).update(state=to, updated_at=now, **fields))
    if moved and to in TERMINAL_STATES:
        from portal.notifications.tasks import enqueue_job_ended  # noqa: PLC0415 - the app imports jobs; not at the top

        enqueue_job_ended(job_id)  # only the move that won: one notification per finished job
    return moved
