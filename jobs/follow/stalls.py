"""Stall detection: a running job none of whose trainers wrote a log line or used CPU for its timeout is Stalled.

Checked by the reconciler, at most every CHECK_SECONDS (and a tenth of its timeout) per job: one fstat of each
trainer's log.txt (the logs lie on the owner's storage for every engine, so the same look serves both), and the
trainers' usage samples (follow/worker_usage.py): more than CPU_FLOOR cores is a sign of life like a log line. A silent
job gets `stalled_at` (the time of its last sign of life: the API's `warnings`, the page, `get jobs`) and a
Stalled event; when a trainer writes or works again both are cleared. With `stall_action: fail` the reconciler
fails it instead (reason Stalled).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from datacenters.models import Datacenter
from jobs import events
from jobs.engines.usage_samples import CPU_FLOOR
from jobs.files import logfiles
from jobs.follow.look_times import LookTimes
from jobs.models import EventKind, Job, JobState, Role
from storage import backends

CHECK_SECONDS = 5.0  # a job's logs are looked at no more often than this...
CHECKS_PER_TIMEOUT = 10  # ...nor more than this often per stall timeout: the default 1800 s looks every 180 s,
# so thousands of running jobs cost the reconciler a few looks a second, not a query and stats per job per cycle
_checked = LookTimes()  # per reconciler process


def _logs_visible(job: Job) -> bool:
    """Whether the portal mounts the job's storage: where it does not, silence cannot be told from blindness."""
    try:
        backends.storage_for(job.datacenter).root_real()
    except backends.StorageUnavailable:
        return False
    return True


def timeout_of(job: Job) -> int:
    """The job's stall timeout in seconds: its spec's, else its datacenter's default; 0 is off."""
    return effective_timeout(job.spec.get("stall_timeout"), job.datacenter)


def effective_timeout(spec_timeout: int | str | None, datacenter: Datacenter) -> int:
    """A spec's `stall_timeout` (None or 0: not set) as it applies in this datacenter."""
    return int(spec_timeout or datacenter.stall_timeout)


def _last_log_line(job: Job, trainer: int) -> datetime | None:
    try:
        fd = logfiles.open_log_fd(job, f"trainer-{trainer}", os.O_RDONLY)
    except OSError:  # not written yet, refused, storage not mounted: no sign of life from this one
        return None
    try:
        return datetime.fromtimestamp(os.fstat(fd).st_mtime, tz=timezone.get_current_timezone())
    finally:
        os.close(fd)


def _last_cpu_use(histories: list[list[list[float]]]) -> datetime | None:
    """When a trainer was last sampled using more than CPU_FLOOR cores; None if never."""
    times = [point[0] for history in histories for point in history or [] if point[1] >= CPU_FLOOR]
    return datetime.fromtimestamp(max(times), tz=UTC) if times else None


def last_sign_of_life(job: Job) -> datetime:
    """When a trainer last wrote a log line, used CPU or (re)started: never stalled before it ran its timeout."""
    trainers = list(job.workers.filter(role=Role.TRAINER).values_list("started_at", "usage_history"))
    signs = [job.started_at or timezone.now()]
    signs += [when for when, _ in trainers if when]
    if cpu := _last_cpu_use([history for _, history in trainers]):
        signs.append(cpu)
    signs += [when for index in range(job.trainers) if (when := _last_log_line(job, index))]
    return max(signs)


def _interval(timeout: int) -> float:
    return max(CHECK_SECONDS, timeout / CHECKS_PER_TIMEOUT)


def due(job_id: int, timeout: int) -> bool:
    """Whether a running job with this stall timeout is due for its check (without noting a look): the full
    reconcile cycle looks at a running job nothing happened to only then (jobs/follow/settled.py)."""
    return bool(timeout) and _checked.waited(job_id, _interval(timeout))


def check(job: Job) -> str:
    """Look at a running job (if due): mark it stalled or not. The message to fail it with, "" to let it run."""
    timeout = timeout_of(job)
    if job.state != JobState.RUNNING or not timeout or not _checked.due(job.pk, _interval(timeout)):
        return ""
    if not _logs_visible(job):
        return ""
    last = last_sign_of_life(job)
    silent = timezone.now() - last > timedelta(seconds=timeout)
    if not silent:
        unmarked = job.stalled_at is not None and Job.objects.filter(pk=job.pk, stalled_at__isnull=False).update(
            stalled_at=None
        )
        if unmarked:
            events.record(job.pk, EventKind.STALLED, "no longer stalled: a trainer wrote a log line or used CPU again")
        return ""
    message = f"no trainer has written a log line or used CPU for {timeout}s (stall timeout)"
    if job.stalled_at is None and Job.objects.filter(pk=job.pk, stalled_at__isnull=True).update(stalled_at=last):
        events.record(job.pk, EventKind.STALLED, message)
    return message if job.spec.get("stall_action") == "fail" else ""


def forget(job_id: int) -> None:
    """Drop a finished job's throttle entry, so the dict holds running jobs only."""
    _checked.forget(job_id)
