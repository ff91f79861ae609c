"""A job's timeline: one JobEvent per change the domain decides, kept to the first MAX_EVENTS of each job.

Written here only, called where the changes are decided (jobs.states' transitions, the scheduler's cycle,
jobs.follow.records when the reconciler writes an observed worker state, the stall check); engines never write
events, as they write no row.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from jobs.models import EventKind, JobEvent, WorkerState

MAX_EVENTS = 1000  # a job restarting a worker forever must not grow the table without end
MAX_MESSAGE = JobEvent._meta.get_field("message").max_length or 500
DROPPED_MESSAGE = f"further events dropped (a job keeps its first {MAX_EVENTS})"
_ENDED = (WorkerState.SUCCEEDED, WorkerState.FAILED)


def _bounded(text: str) -> str:
    text = " ".join(text.split())  # one line: a multi-line message would break the timeline's columns
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def record(job_id: int, kind: EventKind, message: str = "", worker: str = "") -> None:
    """Add one event to the job's timeline; past MAX_EVENTS one DROPPED line is written, then nothing."""
    kept = JobEvent.objects.filter(job_id=job_id).count()
    if kept > MAX_EVENTS:
        return
    if kept == MAX_EVENTS:
        kind, message, worker = EventKind.DROPPED, DROPPED_MESSAGE, ""
    JobEvent.objects.create(job_id=job_id, time=timezone.now(), kind=kind, worker=worker, message=_bounded(message))


def state_changed(job_id: int, to: str, reason: str = "", message: str = "") -> None:
    """The job moved to state `to` (jobs.states.transition, the move that won)."""
    kind = EventKind.PREEMPTED if reason == "Preempted" else EventKind.STATE
    text = f"{to} {reason}".strip()
    record(job_id, kind, f"{text}: {message}" if message else text)


def worker_changed(job_id: int, worker: str, before: tuple[str, int] | None, after: dict[str, Any]) -> None:
    """An observed worker row changes from `before` (state, restarts; None: a new row) to `after` (its values)."""
    old_state, old_restarts = before or (WorkerState.PENDING, 0)
    state, restarts = after.get("state"), int(after.get("restarts") or 0)
    if restarts > old_restarts:
        record(job_id, EventKind.WORKER_RESTARTED, f"restart {restarts}", worker)
    elif state == WorkerState.RUNNING and old_state != WorkerState.RUNNING:
        host = after.get("host") or ""
        record(job_id, EventKind.WORKER_STARTED, f"started on {host}" if host else "started", worker)
    if state == old_state or state not in (*_ENDED, WorkerState.KILLED):
        return
    record(job_id, *_ending(after), worker)


def _ending(after: dict[str, Any]) -> tuple[EventKind, str]:
    """The event of a worker that ended: OOM, killed, or exited with its code."""
    message = str(after.get("message") or "")
    code = after.get("exit_code")
    if "oom" in message.lower() or "over its memory limit" in message:  # the kubelet's words, the local engine's
        return EventKind.WORKER_OOM, message
    if after.get("state") == WorkerState.KILLED:
        return EventKind.WORKER_KILLED, message or "killed"
    said = f"exited with code {code}" if code is not None else f"ended {after.get('state')}"
    if not message or said in message:  # the engine's own words often name the code already
        return EventKind.WORKER_EXITED, message or said
    return EventKind.WORKER_EXITED, f"{said}: {message}"
