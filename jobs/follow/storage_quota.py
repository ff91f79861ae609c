"""The storage quota while jobs run (its own beat task `jobs.follow.storage_quota`): jobs write straight onto the PFS,
so their owners' homes are measured and their started jobs failed when a home outgrows the quota."""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from dataclasses import replace
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from paddlecloud.contract.units import human_bytes

from datacenters import quota
from datacenters.models import Datacenter
from jobs.engines import engine_for
from jobs.engines.base import EngineError
from jobs.follow.reconcile import workers_stopping
from jobs.models import STARTED_STATES, Job, JobState, Reason
from jobs.states import transition
from storage import backends, usage
from storage.models import StorageUsage

log = logging.getLogger(__name__)

QUOTA_CHECK_SECONDS = 5  # a user with a started job has their home measured at most this often
QUOTA_CYCLE_SECONDS = 2.0  # measuring stops for one cycle after this long; the others wait for the next
QUOTA_WALK_SECONDS = 5.0  # one home's walk stops after this long (its counts are then lower bounds)
PREALLOCATED_SHOWN = 1024 * 1024  # below this, space past files' ends is filesystem noise, not worth a word


def enforce_storage_quota() -> list[int]:
    """Measure the homes of users with started jobs, oldest measurement first, and fail their started
    jobs (StorageQuotaExceeded) where a home holds more than the quota. Returns the failed jobs' ids.

    Measured usage, not filesystem quotas: the walk follows no link, counts what quota counts, and
    stops one entry past the file quota (a home that large is over quota already) or after
    QUOTA_WALK_SECONDS. A user's work per cycle is one walk; a cycle stops after QUOTA_CYCLE_SECONDS.
    """
    started = Job.objects.filter(state__in=STARTED_STATES).values_list("owner_id", "datacenter_id").distinct()
    pairs = set(started)
    if not pairs:
        return []
    owners = {pair[0] for pair in pairs}
    measured_at = {
        (row.user_id, row.datacenter_id): row.recomputed_at
        for row in StorageUsage.objects.filter(user_id__in=owners).only("user_id", "datacenter_id", "recomputed_at")
    }
    due = timezone.now() - timedelta(seconds=QUOTA_CHECK_SECONDS)
    never = sorted(pair for pair in pairs if measured_at.get(pair) is None)
    stale = sorted((when, pair) for pair in pairs if (when := measured_at.get(pair)) is not None and when < due)
    failed: list[int] = []
    stop_at = time.monotonic() + QUOTA_CYCLE_SECONDS
    for owner_id, datacenter_id in never + [pair for _, pair in stale]:
        if time.monotonic() > stop_at:
            break
        failed += _check_home(owner_id, datacenter_id)
    return failed


def _check_home(owner_id: int, datacenter_id: int) -> list[int]:
    """Measure one user's home in one datacenter; fail their started jobs there if it is over quota."""
    jobs = Job.objects.select_related("owner", "datacenter")
    job = jobs.filter(owner_id=owner_id, datacenter_id=datacenter_id).first()
    if job is None:
        return []
    owner, datacenter = job.owner, job.datacenter
    limits = quota.limits(owner, datacenter)
    try:
        measured = usage.measure_home(owner, datacenter, limits.storage_files + 1, QUOTA_WALK_SECONDS)
    except backends.StorageUnavailable:
        return []  # the portal does not mount this storage (now): nothing to measure
    engine = engine_for(datacenter)
    with suppress(EngineError):  # no job uid for this user (past the range): none of their jobs starts either
        measured = replace(measured, held_open=engine.held_open_bytes(owner))
    measured = replace(measured, layers=engine.layer_bytes(owner))
    row = usage.record_measurement(owner, datacenter, measured)
    message = _over_quota(measured, row.reserved_bytes, limits, datacenter)
    if not message:
        return []
    log.warning("%s in %s: %s", owner.get_username(), datacenter.name, message)
    return _fail_started(owner_id, datacenter_id, message)


def _over_quota(measured: usage.Measured, reserved: int, limits: quota.Amounts, datacenter: Datacenter) -> str:
    """What is over the quota, naming the sizes; "" when nothing is."""
    where = f"in datacenter {datacenter.name}"
    held = measured.bytes + measured.preallocated + measured.held_open + measured.layers + reserved
    at_least = "" if measured.complete else "at least "
    if held > limits.storage:
        past_end = measured.preallocated
        extra = f" and {human_bytes(past_end)} allocated past their ends" if past_end >= PREALLOCATED_SHOWN else ""
        if measured.held_open:
            extra += f" and {human_bytes(measured.held_open)} in deleted files a job keeps open"
        if measured.layers:
            extra += f" and {human_bytes(measured.layers)} in your jobs' requirement layers (outside your home)"
        extra += f" and {human_bytes(reserved)} reserved by uploads in progress" if reserved else ""
        return (
            f"storage quota exceeded {where}: your files take {at_least}{human_bytes(measured.bytes)}{extra}, "
            f"over the quota of {human_bytes(limits.storage)}; the job was stopped"
        )
    if measured.files > limits.storage_files:
        return (
            f"file count quota exceeded {where}: your home holds {at_least}{measured.files} entries, "
            f"over the quota of {limits.storage_files}; the job was stopped"
        )
    return ""


def _fail_started(owner_id: int, datacenter_id: int, message: str) -> list[int]:
    failed = []
    for job_id in Job.objects.filter(
        owner_id=owner_id, datacenter_id=datacenter_id, state__in=STARTED_STATES
    ).values_list("pk", flat=True):
        with transaction.atomic():
            moved = transition(
                job_id,
                JobState.FAILED,
                from_states=STARTED_STATES,
                reason=Reason.STORAGE_QUOTA_EXCEEDED,
                message=message,
            )
            if moved:
                workers_stopping(job_id, JobState.FAILED)
        if moved:
            failed.append(job_id)
    return failed
