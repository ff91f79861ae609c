"""The reconciler: observe every started job through its engine and move it through the state machine.

The engines report (an Observation per job, and what they did to the Recorder, jobs.follow.records); this
module and jobs.states decide what a job and its workers are, and jobs.follow.records writes the rows.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.locks import exclusive, job_lock
from datacenters.models import Datacenter
from jobs import events, signals
from jobs.engines import engine_for
from jobs.engines.base import Engine, Observation, TransientEngineError
from jobs.engines.capabilities import ChangeVersions, FinalWorkers, UsageMeter, WorkerSpans
from jobs.files import quiet
from jobs.follow import progress, reconcile_runs, restarts, settled, stalls, worker_usage
from jobs.follow.records import RECORDS, note_refused_logs, record_workers
from jobs.models import (
    ACTIVE_STATES,
    STARTED_STATES,
    TERMINAL_STATES,
    EventKind,
    Job,
    JobState,
    Reason,
    Worker,
    WorkerState,
)
from jobs.scheduling import cycle, elastic, ledger, preemption_cost
from jobs.states import transition
from storage.tasks import recompute_usage

log = logging.getLogger(__name__)

COUNT_FIELDS = (
    "trainers_pending", "trainers_running", "trainers_succeeded", "trainers_failed",
    "pservers_pending", "pservers_running", "pservers_failed",
)  # fmt: skip
STUCK_AFTER = timedelta(seconds=30)  # an admitted job not started and not touched for this long is submitted again


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


def _finish(job: Job, engine: Engine) -> bool:
    """Let the engine keep the logs and stop the workers before the final state is written."""
    try:
        return engine.finish(job, RECORDS)
    except TransientEngineError as exc:
        log.warning("cannot finish %s yet: %s", job.uid, exc)
        return False


def apply(
    job: Job, observation: Observation, engine: Engine, workers: dict[tuple[str, int], Worker] | None = None
) -> None:
    if observation.state == JobState.QUEUED and observation.reason == Reason.PREEMPTED:
        # The admission engine (Kueue) stopped it: requeued as the portal's own preemption does.
        cycle.mark_preempted(job.pk, observation.message)
        return
    record_workers(job, observation, workers)
    counts = _counts(observation)
    if observation.state == JobState.FAILED:
        if first := quiet.quiet_first(job):  # a collective's cascade: the rank that hung, not the first to exit
            observation = replace(observation, message=f"{observation.message}; {first}")
        final = restarts.failed(job, observation.reason, observation.message, observation.exit_code)
        if final is None:
            return  # back in the queue, Restarting: requeue_preempted stops its workers and lets it wait again
        observation = replace(observation, reason=final[0], message=final[1])
    if observation.state in (JobState.SUCCEEDED, JobState.FAILED):
        if not _finish(job, engine):
            return  # the next cycle tries again; the job keeps its state meanwhile
        with transaction.atomic():  # the job and its workers become final together
            moved = transition(
                job.pk,
                observation.state,
                reason=observation.reason,
                message=observation.message,
                exit_code=observation.exit_code,
                **counts,
            )
            if moved:
                workers_stopping(job.pk, observation.state)
        if moved:
            log.info("job %s %s %s", job.uid, observation.state, observation.reason)
            job.refresh_from_db()
            release(job, engine)
        return
    if observation.state == JobState.RUNNING and job.state == JobState.PENDING:
        transition(job.pk, JobState.RUNNING, reason="", message="", **counts)
    else:
        _note(job, {"reason": observation.reason or "", "message": observation.message, **counts})
    _check_pending_timeout(job, observation, engine)


def _check_pending_timeout(job: Job, observation: Observation, engine: Engine) -> None:
    """Fail a job pending past its pending_timeout (the spec's, else the datacenter's), saying why it waited."""
    timeout = int(job.spec.get("pending_timeout") or job.datacenter.pending_timeout)
    if (
        job.state == JobState.PENDING
        and observation.state == JobState.PENDING  # not a job that started running in this very cycle
        and job.submitted_at
        and timezone.now() - job.submitted_at > timedelta(seconds=timeout)
    ):
        why = f" ({observation.message})" if observation.message else ""
        if _finish(job, engine) and transition(
            job.pk,
            JobState.FAILED,
            from_states=[JobState.PENDING],
            reason=Reason.PENDING_TIMEOUT,
            message=f"still pending after {timeout}s{why}",
        ):
            job.refresh_from_db()
            release(job, engine)


def _note(job: Job, values: dict[str, Any]) -> None:
    """Write the observed reason and counts if they changed; a new reason (Unschedulable, ...) is an event."""
    if not any(getattr(job, name) != value for name, value in values.items()):
        return
    written = Job.objects.filter(pk=job.pk, state=job.state).update(**values)
    if written and values["reason"] and values["reason"] != job.reason:
        events.record(job.pk, EventKind.WAITING, f"{values['reason']}: {values['message']}")


def check_stall(job: Job, engine: Engine) -> None:
    """Mark a silent running job Stalled (jobs.follow.stalls); with `stall_action: fail`, fail it (reason Stalled),
    or restart it where its spec's max_restarts allows."""
    message = stalls.check(job)
    final = restarts.failed(job, Reason.STALLED, message) if message else None  # None: it restarts
    if (
        final is not None
        and _finish(job, engine)
        and transition(job.pk, JobState.FAILED, from_states=[JobState.RUNNING], reason=final[0], message=final[1])
    ):
        workers_stopping(job.pk, JobState.FAILED)
        job.refresh_from_db()
        release(job, engine)


def workers_stopping(job_id: int, state: str) -> None:
    """Once a job is final no worker shows running or pending, also while its processes are being stopped."""
    stopping = Worker.objects.filter(job_id=job_id, state__in=[WorkerState.RUNNING, WorkerState.PENDING])
    message = f"stopped because the job {state}"
    names = [worker.name for worker in stopping.only("role", "index")]
    if stopping.update(state=WorkerState.KILLED, message=message):
        for name in names:  # the timeline names each worker the job's end stopped
            events.record(job_id, EventKind.WORKER_KILLED, message, name)


def release(job: Job, engine: Engine) -> bool:
    """Stop whatever of a finished job still runs; mark it released once nothing does.

    Under the job's lock, which its start holds while it starts processes: a release never looks at a
    job half started (it would miss what is started next), it tries again at its next look instead.
    """
    with exclusive(job_lock(job.pk)) as held:
        if not held:
            return False
        current = Job.objects.filter(pk=job.pk).values("engine_data", "remove_when_released").first()
        if current is None:
            return True  # removed meanwhile
        job.engine_data = current["engine_data"]  # what the start recorded up to now, not this copy's
        job.remove_when_released = current["remove_when_released"]  # a `kill -rm` sets it before its kill
        return _release(job, engine)


def _measured(engine: Engine, job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the workers of a stopped job used and when they held it, as far as its engine can tell ({}: not)."""
    measured = engine.measured_usage(job) if isinstance(engine, UsageMeter) else {}
    return measured, engine.worker_spans(job) if isinstance(engine, WorkerSpans) else {}


def _release(job: Job, engine: Engine) -> bool:
    workers_stopping(job.pk, job.state)
    if not engine.stop(job, RECORDS):
        return False
    if not job.released:
        # How each one really ended: a trainer that exited 0 meanwhile is succeeded, a killed one shows its code.
        told = engine.final_workers(job) if isinstance(engine, FinalWorkers) else []
        final = [w for w in told if w.state not in (WorkerState.RUNNING, WorkerState.PENDING)]
        if job.state == JobState.KILLED:
            # A kill is final: no worker of a killed job shows succeeded (its exit code still says how it ended).
            final = [replace(w, state=WorkerState.KILLED) if w.state == WorkerState.SUCCEEDED else w for w in final]
        record_workers(job, Observation(JobState(job.state), workers=final))
    if job.state == JobState.SUCCEEDED:
        # pservers never exit by themselves: the engine stopped them because the trainers were done.
        job.workers.filter(role="pserver").update(
            state=WorkerState.SUCCEEDED, message="stopped after every trainer succeeded"
        )
    job.workers.filter(state__in=[WorkerState.RUNNING, WorkerState.PENDING]).update(state=WorkerState.KILLED)
    with transaction.atomic():
        released = Job.objects.filter(pk=job.pk, released=False).update(
            released=True, pservers_running=0, trainers_running=0, pservers_pending=0, trainers_pending=0
        )
        if released:
            # What its workers held (and used), once; the same transaction, so never lost nor doubled.
            measured, spans = _measured(engine, job)
            ledger.record(job, measured, spans=spans)
    if released:
        stalls.forget(job.pk)
        settled.forget(job.pk)
        worker_usage.forget(job.pk)
        progress.finish(job)  # its files are final now: the last step it logged
        signals.job_released.send(sender=Job, job_id=job.pk, datacenter_id=job.datacenter_id)
        note_refused_logs(job)  # its logs are final now: a link or a non-file there is said once, here
        # The job wrote its output and logs straight onto the user's storage: count them in the quota.
        owner, datacenter = job.owner_id, job.datacenter_id
        transaction.on_commit(lambda: recompute_usage.delay(owner, datacenter))
    if job.remove_when_released:
        Job.objects.filter(pk=job.pk).delete()
    return True


def requeue_preempted(job: Job, engine: Engine) -> bool:
    """Once nothing of a preempted job (or one restarting after a failure: jobs.follow.restarts) runs: account its
    run, forget its workers, and let it wait again (attempt + 1).

    Its output folder stays (a checkpoint saved there is what the next attempt resumes from).
    """
    with exclusive(job_lock(job.pk)) as held:
        if not held:
            return False
        job.refresh_from_db()
        if job.state != JobState.QUEUED or job.preempted_at is None:
            return True
        if not engine.stop(job, RECORDS, grace=restarts.stop_grace(job)):
            return False
        if not restarts.waited(job):
            return True  # a restart's backoff: its workers are stopped; it waits in the queue once that is over
        whys = {str(Reason.RESTARTING): "restarting after a failure", str(Reason.RESIZING): "growing"}
        why = whys.get(job.reason, "preempted")
        measured, spans = _measured(engine, job)  # before the cleanup removes what the engine measured
        if not engine.cleanup(job, RECORDS):
            return False
        with transaction.atomic():
            ledger.record(job, measured, spans=spans)
            job.workers.all().delete()
            moved = Job.objects.filter(pk=job.pk, state=JobState.QUEUED, preempted_at__isnull=False).update(
                preempted_at=None, admitted_at=None, borrowing=False, attempt=F("attempt") + 1, engine_data={},
                submitted_at=None, stalled_at=None,
                started_at=None, queued_at=timezone.now(), cleaned=False,
                message=f"{why}; waiting to run again as attempt {job.attempt + 1}",
                **dict.fromkeys(COUNT_FIELDS, 0), **elastic.full_size(job),
            )  # fmt: skip
    if moved:
        signals.job_released.send(sender=Job, job_id=job.pk, datacenter_id=job.datacenter_id)
    return True


def reconcile_datacenter(datacenter: Datacenter, job_ids: Iterable[int] | None = None) -> None:
    """One cycle over the datacenter's jobs; with job_ids, over only those (what an event named: the
    cost of following a change does not grow with the jobs the datacenter runs). A full cycle passes over
    the running jobs nothing happened to since their last look (jobs/follow/settled.py)."""
    engine = engine_for(datacenter)
    jobs = Job.objects.filter(datacenter=datacenter)
    preempting = cycle.preempting(datacenter).select_related("owner", "datacenter")
    if job_ids is not None:
        ids = list(job_ids)
        jobs, preempting = jobs.filter(pk__in=ids), preempting.filter(pk__in=ids)
    for job in preempting:
        with _alone(job, datacenter, "stop preempted"):
            requeue_preempted(job, engine)
    try:
        _follow_started(jobs.filter(state__in=STARTED_STATES), datacenter, engine, full=job_ids is None)
    except TransientEngineError as exc:
        log.warning("cannot reach datacenter %s: %s", datacenter.name, exc)
        reconcile_runs.engine_error(datacenter.pk, f"cannot reach the datacenter: {exc}")  # the health page
        return
    for job in _with_relations(list(jobs.filter(state__in=TERMINAL_STATES, released=False)), datacenter):
        with _alone(job, datacenter, "release"):
            release(job, engine)
    if job_ids is None:
        preemption_cost.update(datacenter)  # where Kueue chooses victims: what stopping each running job costs


REPEAT_LOG_SECONDS = 600.0  # one traceback per job, step and error this often, however many cycles it breaks
MAX_TOLD = 10_000
_told: dict[tuple[int, str, str], float] = {}  # (job, step, error) -> when its traceback was last logged
# A step that breaks this many cycles in a row, over at least FAIL_AFTER_SECONDS (event-driven cycles can
# come many a second), fails the job (EngineError) if it has not ended: it would otherwise hold its room for
# good, followed by nobody.
FAIL_AFTER = 10
FAIL_AFTER_SECONDS = 60.0
_broke: dict[tuple[int, str], tuple[int, float]] = {}  # (job, step) -> (cycles in a row it broke, since when)


@contextmanager
def _alone(job: Job, datacenter: Datacenter, what: str) -> Iterator[None]:
    """One job's step of the cycle, apart from the others': whatever breaks it (the engine away, or a job that
    broke its own folders in a way nothing foresaw) is logged and shown on the health page, and the cycle goes
    on to the next job; this one is tried again at the next cycle."""
    try:
        yield
    except TransientEngineError as exc:
        log.warning("cannot %s %s: %s", what, job.uid, exc)
        reconcile_runs.engine_error(datacenter.pk, f"cannot {what} {job.uid}: {exc}")
    except Exception as exc:  # one job's breakage must not stop the datacenter's reconcile
        key, now = (job.pk, what, type(exc).__name__), time.monotonic()
        if now - _told.get(key, -REPEAT_LOG_SECONDS) >= REPEAT_LOG_SECONDS:  # a traceback per error, not per cycle
            if len(_told) >= MAX_TOLD:
                _told.clear()
            _told[key] = now
            log.exception("cannot %s %s", what, job.uid)
        reconcile_runs.engine_error(datacenter.pk, f"cannot {what} {job.uid}: {type(exc).__name__}: {exc}")
        if len(_broke) >= MAX_TOLD:
            _broke.clear()
        count, since = _broke.get((job.pk, what), (0, now))
        _broke[(job.pk, what)] = (count + 1, since)
        if count + 1 >= FAIL_AFTER and now - since >= FAIL_AFTER_SECONDS:
            _give_up(job, what, exc)
    else:
        _broke.pop((job.pk, what), None)


def _give_up(job: Job, what: str, exc: Exception) -> None:
    """Fail a job one step broke in FAIL_AFTER cycles in a row (if it has not ended): the release that follows
    stops its workers and frees its room. Terminal already (its release broke): nothing more to decide."""
    cause = f"{type(exc).__name__}: {exc}"[:200]
    message = (
        f"the portal could not {what} this job in {FAIL_AFTER} cycles in a row ({cause}); it was failed so its "
        "room is freed (the control worker's log has the traceback)"
    )
    with transaction.atomic():
        moved = transition(
            job.pk, JobState.FAILED, from_states=ACTIVE_STATES, reason=Reason.ENGINE_ERROR, message=message
        )
        if moved:
            workers_stopping(job.pk, JobState.FAILED)
    if moved:
        log.warning("job %s failed: %s", job.uid, message)
        _broke.pop((job.pk, what), None)


def _with_relations(jobs: list[Job], datacenter: Datacenter) -> list[Job]:
    """Give the datacenter's jobs their owner and datacenter, each loaded once: select_related would build
    (and decrypt the credentials of) one Datacenter and one User per job, most of a watched cycle's time at
    thousands of jobs (bench/reconcile_scale.py --profile). A job whose owner went meanwhile went with them."""
    owners = User.objects.in_bulk({job.owner_id for job in jobs}) if jobs else {}
    for job in jobs:
        job.datacenter = datacenter
        if job.owner_id in owners:
            job.owner = owners[job.owner_id]
    return [job for job in jobs if job.owner_id in owners]


def _follow_started(started_jobs: Any, datacenter: Datacenter, engine: Engine, full: bool) -> None:
    """Observe the started jobs (a queryset) through their engine and apply what it saw. A full cycle passes
    over the running jobs nothing happened to since their last look (jobs/follow/settled.py)."""
    rows = _rows(started_jobs, datacenter)
    # Before the objects are read (poll): a change landing in between shows as a new version at the next look.
    versions = engine.versions([row.uid for row in rows], complete=full) if isinstance(engine, ChangeVersions) else None
    if full and versions is not None:
        looks = settled.due(datacenter.pk, rows, versions)
        if len(looks) < len(rows):
            started_jobs = started_jobs.filter(pk__in=looks)
    started = _with_relations(list(started_jobs), datacenter)
    if not started:
        return
    observations = engine.poll(started, RECORDS)
    workers: dict[int, dict[tuple[str, int], Worker]] = defaultdict(dict)
    for worker in Worker.objects.filter(job__in=started_jobs.values("pk")):
        workers[worker.job_id][(worker.role, worker.index)] = worker
    for job in started:
        if job.pk in observations:
            seen = observations[job.pk]
            with _alone(job, datacenter, "follow"):  # not noted as settled where it broke: looked at again
                apply(job, seen, engine, workers[job.pk])
                check_stall(job, engine)
                counts = _counts(seen)
                written = (seen.reason or "", *(counts[name] for name in COUNT_FIELDS))  # as _note left the row
                settled.note(datacenter.pk, job.pk, (versions or {}).get(job.uid), job.state, seen, written)


def _rows(started_jobs: Any, datacenter: Datacenter) -> list[settled.Row]:
    """The few columns of each started job that settled.due decides on: one light query, whatever their number."""
    columns = ("pk", "uid", "state", "owner_id", "spec__stall_timeout", "spec__registry")
    rows = []
    for pk, uid, state, owner, stall, registry, blanked, *written in started_jobs.values_list(
        *columns, "engine_data__registry_revoked", "reason", *COUNT_FIELDS
    ):
        stall_timeout = stalls.effective_timeout(stall, datacenter)
        registry = str(registry or "")
        rows.append(settled.Row(pk, uid, state, owner, stall_timeout, registry, bool(blanked), tuple(written)))
    return rows


def stuck_submissions() -> list[int]:
    """Jobs whose submit_job was lost (a worker killed mid-task, a broker restart): submit them again."""
    cutoff = timezone.now() - STUCK_AFTER
    admitted = Q(state=JobState.QUEUED, admitted_at__isnull=False, preempted_at__isnull=True) | Q(
        state=JobState.SUBMITTING
    )
    stuck = Job.objects.filter(admitted, updated_at__lt=cutoff)
    ids = list(stuck.values_list("pk", flat=True))
    # Touch them so the next cycles do not enqueue them again while this submission runs.
    Job.objects.filter(pk__in=ids).update(updated_at=timezone.now())
    return ids
