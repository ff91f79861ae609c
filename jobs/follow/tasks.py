"""Celery tasks for jobs: passed ids, idempotent, and safe to run twice or after a worker died."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import timedelta

from celery import shared_task
from celery.app.task import Task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections, transaction
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from paddlecloud.contract import keeping

from core.locks import exclusive, job_lock
from datacenters.models import Datacenter
from jobs import hooks
from jobs.engines import engine_for
from jobs.engines.base import Engine, EngineError, TransientEngineError
from jobs.engines.capabilities import QuotaSync, Reaper, RegistryLogins, WorkerEvents
from jobs.files import checkpoints
from jobs.follow import looks, reconcile_runs
from jobs.follow.reconcile import reconcile_datacenter, release, stuck_submissions
from jobs.follow.records import RECORDS
from jobs.follow.storage_quota import enforce_storage_quota
from jobs.models import TERMINAL_STATES, Job, JobState, Reason
from jobs.scheduling import cycle
from jobs.states import transition

log = logging.getLogger(__name__)


@shared_task(name="jobs.submit_job", bind=True, max_retries=None, acks_late=True)
def submit_job(self: Task, job_id: int) -> None:  # type: ignore[type-arg]
    if hooks.admit(job_id) != hooks.Verdict.GO:
        return  # e.g. its image is still building (the build's end sends it again), or the build failed it
    if not Job.objects.filter(pk=job_id, admitted_at__isnull=False).exists():
        return  # not admitted by the scheduler (jobs.scheduling) yet: it waits in the queue, whose cycle starts it
    if not transition(job_id, JobState.SUBMITTING, reason=Reason.NONE):
        return  # already submitted, or killed before it started
    job = Job.objects.select_related("owner", "datacenter").get(pk=job_id)
    engine = engine_for(job.datacenter)
    with exclusive(job_lock(job_id)) as held:
        if not held:
            return  # another worker is starting this very job
        job.refresh_from_db(fields=["state", "engine_data"])
        if job.state in TERMINAL_STATES:
            return  # killed before the lock was ours: its release ran alone, so nothing may start now
        try:
            engine.start(job, RECORDS)
        except EngineError as exc:
            reconcile_runs.engine_error(job.datacenter_id, f"start of {job.uid} failed: {exc}")
            transition(job_id, JobState.FAILED, reason=Reason.SUBMIT_FAILED, message=str(exc))
            engine.stop(job, RECORDS)
            return
        except TransientEngineError as exc:
            reconcile_runs.engine_error(job.datacenter_id, f"start of {job.uid} to be retried: {exc}")
            Job.objects.filter(pk=job_id, state=JobState.SUBMITTING).update(message=f"retrying: {exc}")
            countdown = min(60, 2 ** min(self.request.retries, 6))
            raise self.retry(countdown=countdown) from None
    if transition(job_id, JobState.PENDING, submitted_at=timezone.now(), message=""):
        _tell_started(engine, job)
    else:
        now = Job.objects.select_related("owner", "datacenter").filter(pk=job_id).first()  # gone after `kill -rm`
        if now is not None and now.state in TERMINAL_STATES and not release(now, engine):
            kill_job.delay(job_id)  # killed while starting: what was just started is stopped, look by look


def _tell_started(engine: Engine, job: Job) -> None:
    """An engine that hears its workers' events may look at the job at once (capabilities.WorkerEvents)."""
    if isinstance(engine, WorkerEvents):
        engine.started(job)


KILL_RECHECK_SECONDS = 0.5  # how soon a kill looks again while the job's processes or pods wind down


@shared_task(
    name="jobs.revoke_registry_login",
    acks_late=True,
    autoretry_for=(TransientEngineError,),
    retry_backoff=True,
    max_retries=10,
)
def revoke_registry_login(username: str, name: str) -> None:
    """A deleted registry secret leaves no copy of its login in any datacenter (safe to run again)."""
    for datacenter in Datacenter.objects.all():
        engine = engine_for(datacenter)
        if isinstance(engine, RegistryLogins):
            engine.revoke_registry_secret(username, name)


@shared_task(
    name="jobs.apply_quotas",
    acks_late=True,
    autoretry_for=(TransientEngineError, EngineError),
    retry_backoff=True,
    max_retries=10,
)
def apply_quotas(datacenter_id: int, user_ids: list[int] | None = None) -> None:
    """Quotas, teams or weights changed in a datacenter: the engine rewrites what it keeps of them (Kueue's queues
    and cohorts, namespace quotas) for the users with jobs there, those named or all (safe to run again)."""
    datacenter = Datacenter.objects.filter(pk=datacenter_id).first()
    if datacenter is None:
        return
    owners = get_user_model().objects.filter(jobs__datacenter=datacenter).distinct()
    if user_ids is not None:
        owners = owners.filter(pk__in=user_ids)
    engine = engine_for(datacenter)
    if isinstance(engine, QuotaSync):
        engine.apply_quotas(owners)


@shared_task(name="jobs.kill_job", acks_late=True)
def kill_job(job_id: int, until: float | None = None) -> None:
    """Stop a killed job's processes or pods; while some still run, look again soon, until the grace is over.

    Looking again is a new message with a countdown, not a sleep: no worker slot waits out a grace
    period, and any worker may take the next look. `until` (epoch seconds) travels with the messages;
    whatever is left after it, the reconciler's release sweep finishes.
    """
    deadline = until if until is not None else time.time() + settings.PADDLECLOUD_KILL_GRACE_SECONDS + 15
    job = Job.objects.select_related("owner", "datacenter").filter(pk=job_id).first()
    if job is None or job.state not in TERMINAL_STATES or job.released:
        return
    if release(job, engine_for(job.datacenter)):
        return
    if time.time() < deadline:
        kill_job.apply_async((job_id, deadline), countdown=KILL_RECHECK_SECONDS)


@shared_task(name="jobs.schedule", ignore_result=True)
def schedule(datacenter_id: int | None = None) -> None:
    """A scheduling cycle of one datacenter (a submit or a release woke it), or of each with waiting jobs or an
    elastic job below its most trainers (beat: room freed before it ran long enough to grow is taken later)."""
    if datacenter_id is not None:
        datacenters = Datacenter.objects.filter(pk=datacenter_id)
    else:
        below_most = Job.objects.filter(
            state=JobState.RUNNING, released=False, min_trainers__gt=0, trainers_now__gt=0,
            trainers_now__lt=F("max_trainers"),
        )  # fmt: skip
        datacenters = Datacenter.objects.filter(
            Q(pk__in=Job.objects.filter(state=JobState.QUEUED, admitted_at__isnull=True).values("datacenter_id"))
            | Q(pk__in=below_most.values("datacenter_id"))
        )
    for datacenter in datacenters:
        for job_id in cycle.schedule(datacenter) or ():
            submit_job.delay(job_id)


@shared_task(name="jobs.prune_checkpoints", acks_late=True)
def prune_checkpoints(job_id: int) -> None:
    """Apply the ended job's `keep` policy to its checkpoints (jobs.files.checkpoints.prune): twice is once, as
    the kept ones stay kept. Only once it was released: nothing of it writes there any more."""
    job = Job.objects.select_related("owner", "datacenter").filter(
        pk=job_id, released=True, state__in=TERMINAL_STATES
    ).first()  # fmt: skip
    policy = job.spec.get("keep") if job is not None else None
    if job is None or not isinstance(policy, dict):
        return
    removed = checkpoints.prune(job, *keeping.policy(policy))
    if removed:
        log.info("job %s: %d checkpoints removed by its keep policy", job.uid, removed)


def prune_when_released(sender: object, job_id: int, **kwargs: object) -> None:
    """Receives job_released: a job whose spec has a `keep` policy gets it applied, by a worker (it walks the PFS).
    Where the broker does not take it the checkpoints stay, as they would without a policy, and it is logged."""
    if not Job.objects.filter(pk=job_id, spec__has_key="keep").exists():
        return

    def send() -> None:
        try:
            prune_checkpoints.delay(job_id)
        except (KombuOperationalError, OSError) as exc:
            log.warning("job %s: the broker did not take its checkpoint pruning (%s)", job_id, exc)

    transaction.on_commit(send)


def wake_scheduler(sender: object, datacenter_id: int, **kwargs: object) -> None:
    """A released job freed its requests: schedule its datacenter once that is committed, here and now.

    Here, not through the broker: the release runs in a worker already (the control worker's reconcile,
    or a kill's), a cycle is bounded (tens of ms), and the next job starts one broker hop sooner. Where
    another cycle holds the datacenter's lock (it may have looked before this release), one is queued.
    """

    def now() -> None:
        datacenter = Datacenter.objects.filter(pk=datacenter_id).first()
        if datacenter is None:
            return
        admitted = cycle.schedule(datacenter)
        if admitted is None:
            schedule.delay(datacenter_id)
            return
        for job_id in admitted:
            submit_job.delay(job_id)

    transaction.on_commit(now)


@shared_task(name="jobs.reconcile", ignore_result=True)
def reconcile() -> None:
    with exclusive("reconcile") as held:
        if not held:
            return  # the previous cycle is still running; this tick is not needed
        for job_id in stuck_submissions():
            submit_job.delay(job_id)
        busy = Datacenter.objects.filter(
            Q(jobs__state__in=[JobState.PENDING, JobState.RUNNING])
            | Q(jobs__state=JobState.QUEUED, jobs__preempted_at__isnull=False)
            | Q(jobs__released=False, jobs__state__in=TERMINAL_STATES)
        ).distinct()
        _reconcile_each(busy)


PROMPT_WAIT_SECONDS = 2.0  # an event waits this long for a running cycle to end, then leaves it to the next tick


def reconcile_promptly(job_ids: set[int]) -> None:
    """Events from local jobs' processes (jobs/engines/local/events.py) or Kubernetes watches
    (jobs/follow/listener.py): reconcile these jobs now (only these: the beat's cycle follows the others).

    Runs in the control worker's event listener, not from the broker, so no queue lies between a
    process's exit and its job's state. A cycle already running may have looked before the event:
    wait for it briefly, then look again.
    """
    deadline = time.monotonic() + PROMPT_WAIT_SECONDS
    try:
        while True:
            with exclusive("reconcile") as held:
                if held:
                    _reconcile_each(Datacenter.objects.filter(jobs__pk__in=job_ids).distinct(), job_ids)
                    return
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
    finally:
        close_old_connections()  # a long-lived thread: never keep a connection the database closed


def _reconcile_each(datacenters: Iterable[Datacenter], job_ids: set[int] | None = None) -> None:
    for datacenter in datacenters:
        started, clock, error = timezone.now(), time.monotonic(), ""
        try:
            reconcile_datacenter(datacenter, job_ids)
        except Exception as exc:
            # One broken datacenter must not stop the others from being followed.
            log.exception("reconcile of datacenter %s failed", datacenter.name)
            error = f"{type(exc).__name__}: {exc}"
            reconcile_runs.engine_error(datacenter.pk, f"reconcile failed: {error}")
        if job_ids is None or error:  # the health page shows full cycles (and any error), not one job's look
            reconcile_runs.record(datacenter.pk, started, time.monotonic() - clock, error)


@shared_task(name="jobs.sample_usage", ignore_result=True)
def sample_usage() -> None:
    """Each running worker's CPU and memory, and each running job's progress (jobs/follow/looks.py): its own task and
    lock, so a slow kubelet or file never holds up the reconciler."""
    with exclusive("sample-usage") as held:
        if held:
            looks.sample_running()


@shared_task(name="jobs.storage_quota", ignore_result=True)
def storage_quota() -> None:
    """Jobs write straight onto the PFS: the quota is held by measuring their owners' homes. Its own
    task (and lock), so a long walk of a big home never holds up the reconciler."""
    with exclusive("storage-quota") as held:
        if not held:
            return
        for job_id in enforce_storage_quota():
            kill_job.delay(job_id)


@shared_task(name="jobs.cleanup", ignore_result=True)
def cleanup() -> None:
    """Delete engine objects of finished jobs after their datacenter's TTL (logs are on the PFS)."""
    with exclusive("cleanup") as held:
        if not held:
            return
        now = timezone.now()
        for job in Job.objects.filter(state__in=TERMINAL_STATES, released=True, cleaned=False).select_related(
            "owner", "datacenter"
        ):
            if job.finished_at and now - job.finished_at < timedelta(seconds=job.datacenter.finished_ttl):
                continue
            try:
                if engine_for(job.datacenter).cleanup(job, RECORDS):
                    Job.objects.filter(pk=job.pk).update(cleaned=True)
            except (EngineError, TransientEngineError) as exc:
                log.warning("cleanup of %s failed: %s", job.uid, exc)
                reconcile_runs.engine_error(job.datacenter_id, f"cleanup of {job.uid} failed: {exc}")
        # The reaper: engine objects whose job row is gone (or finished past its TTL) are deleted too.
        for datacenter in Datacenter.objects.all():
            try:
                engine = engine_for(datacenter)
                reaped = engine.reap() if isinstance(engine, Reaper) else 0
            except Exception as exc:
                # One unreachable or misconfigured datacenter must not stop the others from being reaped.
                log.exception("reaping datacenter %s failed", datacenter.name)
                reconcile_runs.engine_error(datacenter.pk, f"reaping failed: {type(exc).__name__}: {exc}")
                continue
            if reaped:
                log.info("reaped %d orphaned object(s) in datacenter %s", reaped, datacenter.name)
