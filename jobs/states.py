"""State transitions as conditional UPDATEs: whoever moves a job first wins; a repeat does nothing.

The engine's record of a job (`engine_data`) is written the same way, key by key in one UPDATE
(`merge_engine_data`), so two tasks recording at once (a start and a kill) never drop each other's keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection
from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core import transitions
from jobs import events, signals
from jobs.models import TERMINAL_STATES, Job, JobState, Worker

# Which states each state may be entered from (the state machine, in one place).
ALLOWED_FROM: dict[JobState, tuple[JobState, ...]] = {
    JobState.QUEUED: (JobState.PENDING, JobState.RUNNING),  # a preemption puts a started job back in the queue
    JobState.SUBMITTING: (JobState.QUEUED, JobState.SUBMITTING),
    JobState.PENDING: (JobState.SUBMITTING,),
    JobState.RUNNING: (JobState.SUBMITTING, JobState.PENDING),
    JobState.SUCCEEDED: (JobState.PENDING, JobState.RUNNING),
    JobState.FAILED: (JobState.QUEUED, JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING),
    JobState.KILLED: (JobState.QUEUED, JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING),
}


def transition(job_id: int, to: JobState, *, from_states: Iterable[JobState] | None = None, **fields: Any) -> bool:
    """Move the job to `to` if it is in one of `from_states` (default: every state allowed); True if moved."""
    now = timezone.now()
    if to in TERMINAL_STATES:
        fields.setdefault("finished_at", now)
        fields.update(final_counts(to, fields))
    if to == JobState.RUNNING:
        fields.setdefault("started_at", now)
    if to == JobState.SUCCEEDED:
        # A job fast enough to end between two polls was never seen running, yet it ran: its start is
        # when its first worker started (else now), so the timeline and the duration have one.
        workers = Worker.objects.filter(job=OuterRef("pk"), started_at__isnull=False).order_by("started_at")
        first_start = Subquery(workers.values("started_at")[:1])
        fields.setdefault("started_at", Coalesce(F("started_at"), first_start, Value(now)))
    moved = transitions.move(Job, job_id, to, ALLOWED_FROM, from_states=from_states, **fields)
    if moved and to != JobState.SUBMITTING:  # a submit tried again moves SUBMITTING to itself: one event is enough
        events.state_changed(job_id, to, str(fields.get("reason") or ""), str(fields.get("message") or ""))
    if moved and to in TERMINAL_STATES:
        signals.job_ended.send(sender=Job, job_id=job_id)  # only the move that won: once per finished job
    return moved


def final_counts(to: JobState, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The per-role counts of a job that turns `to` (final), written with the state in one UPDATE.

    Nothing of a final job runs or waits any more: its running and pending workers are being stopped, so
    they count as failed (their workers show `killed`), except the pservers of a succeeded job, which are
    stopped because they are done. Counts just observed (in `fields`) are folded; else the row's own.
    """
    counts: dict[str, Any] = {}
    for role in ("trainers", "pservers"):
        running, pending, failed = f"{role}_running", f"{role}_pending", f"{role}_failed"
        if running in fields:
            stopped: Any = fields[running] + fields.get(pending, 0)
        else:
            stopped = F(running) + F(pending)
        if to != JobState.SUCCEEDED:
            counts[failed] = fields.get(failed, F(failed)) + stopped
        counts[running] = counts[pending] = 0
    return counts


def merge_engine_data(job_id: int, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Set these keys of the job's engine data in one UPDATE, keeping every other key as the row holds it
    now (never a stale copy's); returns the row's engine data after it."""
    # Only the model's own table and column names are formatted in; every value is a bound parameter.
    table = connection.ops.quote_name(Job._meta.db_table)
    column = connection.ops.quote_name(Job._meta.get_field("engine_data").column or "engine_data")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql = f"UPDATE {table} SET {column} = COALESCE({column}, '{{}}'::jsonb) || %s::jsonb WHERE id = %s"  # noqa: S608
            cursor.execute(sql, [json.dumps(changes), job_id])
        else:  # SQLite: json_set replaces whole values, as jsonb's || does
            pairs = ", ".join(["%s, json(%s)"] * len(changes))
            sql = f"UPDATE {table} SET {column} = json_set(COALESCE({column}, '{{}}'), {pairs}) WHERE id = %s"  # noqa: S608
            values = [item for key, value in changes.items() for item in (f"$.{json.dumps(key)}", json.dumps(value))]
            cursor.execute(sql, [*values, job_id])
    current = Job.objects.filter(pk=job_id).values_list("engine_data", flat=True).first()
    return dict(current) if current is not None else dict(changes)


def remove_when_released(job_id: int) -> None:
    """Have the job's row deleted once its engine released it (`kill -rm` of a job still active)."""
    Job.objects.filter(pk=job_id).update(remove_when_released=True)
