"""What engines report, written onto the domain's rows: the one writer of Worker rows and engine data.

Engines write no row (jobs.engines.base): they report to a `JobRecords` that the reconciler and the
tasks hand them, and the worker statuses they observe are recorded here by the reconciler. Reading a
log writes nothing; a log the portal refuses is noted on its worker's row when the job is released.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.utils import timezone
from paddlecloud.contract.states import worker_name

from jobs import events
from jobs.engines.base import Observation, WorkerStatus
from jobs.files import logfiles
from jobs.models import Job, Role, Worker
from jobs.states import merge_engine_data

_WORKER_FIELDS = ("state", "host", "pid", "started_at", "restarts", "exit_code", "message")


class JobRecords:
    """The Recorder (jobs.engines.base) the domain hands every engine call that may act."""

    def keep(self, job: Job, changes: Mapping[str, Any]) -> None:
        job.engine_data = merge_engine_data(job.pk, changes)

    def planned(self, job: Job, workers: Iterable[tuple[Role, int]]) -> None:
        for role, index in workers:
            Worker.objects.get_or_create(job=job, role=role, index=index)

    def started(self, job: Job, status: WorkerStatus) -> None:
        values = {name: getattr(status, name) for name in _WORKER_FIELDS}
        before = Worker.objects.filter(job=job, role=status.role, index=status.index).values_list("state", "restarts")
        events.worker_changed(job.pk, worker_name(status.role, status.index), before.first(), values)
        Worker.objects.update_or_create(job=job, role=status.role, index=status.index, defaults=values)

    def note(self, job: Job, worker: str, message: str) -> None:
        note_worker(job, worker, message)


RECORDS = JobRecords()


def note_worker(job: Job, worker: str, message: str) -> None:
    """Say `message` on the row of worker "trainer-0" of `job` (`paddlectl get workers`, the job page)."""
    role, _, index = worker.partition("-")
    Worker.objects.filter(job=job, role=role, index=int(index)).exclude(message=message).update(message=message)


def note_refused_logs(job: Job) -> None:
    """Note on each worker's row whether the portal refuses its log (a link or a non-file where it lies)."""
    for role, index in Worker.objects.filter(job=job).values_list("role", "index"):
        name = worker_name(role, index)
        message = logfiles.refusal(job, name)
        if message:
            note_worker(job, name, message)


def record_workers(job: Job, observation: Observation, known: dict[tuple[str, int], Worker] | None = None) -> None:
    """Write the observed worker statuses, touching only rows that changed (most do not, most cycles)."""
    if known is None:
        known = {(w.role, w.index): w for w in Worker.objects.filter(job=job)}
    changed = []
    now = timezone.now()
    for status in observation.workers:
        values = {name: getattr(status, name) for name in _WORKER_FIELDS}
        worker = known.get((str(status.role), status.index))
        if worker is not None and values["started_at"] is None:
            values["started_at"] = worker.started_at  # a pod gone (a JobSet ends its pservers) un-starts no worker
        if worker is None or worker.state != values["state"] or worker.restarts != values["restarts"]:
            before = (worker.state, worker.restarts) if worker else None
            events.worker_changed(job.pk, worker_name(status.role, status.index), before, values)
        if worker is None:
            Worker.objects.update_or_create(job=job, role=status.role, index=status.index, defaults=values)
        elif any(getattr(worker, name) != value for name, value in values.items()):
            for name, value in values.items():
                setattr(worker, name, value)
            worker.updated_at = now
            changed.append(worker)
    if changed:
        Worker.objects.bulk_update(changed, [*_WORKER_FIELDS, "updated_at"])
