"""The reconciler: observe every started job through its engine and move it through the state machine."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from jobs.engines import engine_for
from jobs.engines.base import Engine, Observation, TransientEngineError
from jobs.models import STARTED_STATES, TERMINAL_STATES, Job, JobState, Reason, Worker, WorkerState
from jobs.states import transition
from portal.datacenters.models import Datacenter

log = logging.getLogger(__name__)

STUCK_AFTER = timedelta(seconds=30)  # a queued/submitting job not touched for this long is submitted again


def _record_workers(job: Job, observation: Observation) -> None:
    for status in observation.workers:
        Worker.objects.update_or_create(
            job=job,
            role=status.role,
            index=status.index,
            defaults={
                "state": status.state,
                "host": status.host,
                "pid": status.pid,
                "started_at": status.started_at,
                "restarts": status.restarts,
                "exit_code": status.exit_code,
                "message": status.message,
            },
        )


def _counts(observation: Observation) -> dict[str, Any]:
    counts = {
        "trainers_pending": 0,
        "trainers_running": 0,
        "trainers_succeeded": 0,
        "trainers_failed": 0,
        "pservers_pending": 0,
        "pservers_running": 0,
        "pservers_failed": 0,
    }
    for status in observation.workers:
        key = f"{status.role}s_{status.state}"
        if status.state == WorkerState.KILLED:
            key = f"{status.role}s_failed"
        if key in counts:
            counts[key] += 1
    return counts


def apply(job: Job, observation: Observation, engine: Engine) -> None:
    _record_workers(job, observation)
    counts = _counts(observation)
    if observation.state in (JobState.SUCCEEDED, JobState.FAILED):
        moved = transition(
            job.pk,
            observation.state,
            reason=observation.reason,
            message=observation.message,
            exit_code=observation.exit_code,
            **counts,
        )
        if moved:
            log.info("job %s %s %s", job.uid, observation.state, observation.reason)
            job.refresh_from_db()
            release(job, engine)
        return
    if observation.state == JobState.RUNNING and job.state == JobState.PENDING:
        transition(job.pk, JobState.RUNNING, reason="", message="", **counts)
    else:
        Job.objects.filter(pk=job.pk, state=job.state).update(
            reason=observation.reason or "", message=observation.message, **counts
        )
    timeout = int(job.spec.get("pending_timeout") or job.datacenter.pending_timeout)
    if (
        job.state == JobState.PENDING
        and job.submitted_at
        and timezone.now() - job.submitted_at > timedelta(seconds=timeout)
    ):
        why = f" ({observation.message})" if observation.message else ""
        if transition(
            job.pk, JobState.FAILED, reason=Reason.PENDING_TIMEOUT, message=f"still pending after {timeout}s{why}"
        ):
            job.refresh_from_db()
            release(job, engine)


def release(job: Job, engine: Engine) -> bool:
    """Stop whatever of a finished job still runs; mark it released once nothing does."""
    if not engine.stop(job):
        return False
    if job.state == JobState.SUCCEEDED:
        # pservers never exit by themselves: the engine stopped them because the trainers were done.
        job.workers.filter(role="pserver").update(
            state=WorkerState.SUCCEEDED, message="stopped after every trainer succeeded"
        )
    job.workers.filter(state__in=[WorkerState.RUNNING, WorkerState.PENDING]).update(state=WorkerState.KILLED)
    Job.objects.filter(pk=job.pk).update(
        released=True, pservers_running=0, trainers_running=0, pservers_pending=0, trainers_pending=0
    )
    if job.engine_data.get("remove"):
        Job.objects.filter(pk=job.pk).delete()
    return True


def reconcile_datacenter(datacenter: Datacenter) -> None:
    engine = engine_for(datacenter)
    started = list(
        Job.objects.filter(datacenter=datacenter, state__in=STARTED_STATES).select_related("owner", "datacenter")
    )
    if started:
        try:
            observations = engine.poll(started)
        except TransientEngineError as exc:
            log.warning("cannot reach datacenter %s: %s", datacenter.name, exc)
            return
        for job in started:
            if job.pk in observations:
                apply(job, observations[job.pk], engine)
    for job in Job.objects.filter(datacenter=datacenter, state__in=TERMINAL_STATES, released=False).select_related(
        "owner", "datacenter"
    ):
        try:
            release(job, engine)
        except TransientEngineError as exc:
            log.warning("cannot release %s: %s", job.uid, exc)


def stuck_submissions() -> list[int]:
    """Jobs whose submit_job was lost (a worker killed mid-task, a broker restart): submit them again."""
    cutoff = timezone.now() - STUCK_AFTER
    stuck = Job.objects.filter(state__in=[JobState.QUEUED, JobState.SUBMITTING], updated_at__lt=cutoff)
    ids = list(stuck.values_list("pk", flat=True))
    # Touch them so the next cycles do not enqueue them again while this submission runs.
    Job.objects.filter(pk__in=ids).update(updated_at=timezone.now(), engine_data=F("engine_data"))
    return ids
