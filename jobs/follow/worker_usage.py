"""Live resource use per worker: how the portal samples and records it.

An engine's `sample_usage(job)` returns a WorkerUsage (jobs.engines.usage_samples) per running worker (the local engine
reads each process's cgroup, the Kubernetes one the kubelet's summary API); the beat's `jobs.sample_usage`
task (jobs/follow/looks.py) samples each running job at most every SAMPLE_SECONDS. This module writes the rows:
`Worker.usage` (the latest sample, shown while the worker runs) and `Worker.usage_history` (a bounded series
for the job page's chart, kept after the job ends).
"""

from __future__ import annotations

import logging
from typing import Any

from jobs.engines.base import Engine, TransientEngineError
from jobs.engines.capabilities import UsageSampler
from jobs.engines.usage_samples import WorkerUsage, with_point
from jobs.follow import stalls
from jobs.follow.look_times import LookTimes
from jobs.models import Job, JobState, Worker

log = logging.getLogger(__name__)

# Every 10 s: the chart then resolves a minute-long phase, and a reconciler with a thousand running jobs reads
# a hundred cgroups (or one kubelet summary per node) a second at most, never one job's files per cycle.
SAMPLE_SECONDS = 10.0
sampled = LookTimes()  # when each job was last sampled, per sampling process (jobs/follow/looks.py orders by it)


def record(job: Job, samples: dict[str, WorkerUsage]) -> None:
    """Write each sampled worker's usage and add it to its history (one update per worker)."""
    for worker in job.workers.all():
        usage = samples.get(worker.name)
        if usage is not None:
            history = with_point(list(worker.usage_history or []), usage)
            Worker.objects.filter(pk=worker.pk).update(usage=usage.to_json(), usage_history=history)


def interval_of(job: Job) -> float:
    """SAMPLE_SECONDS, or a third of the job's stall timeout where that is shorter (1 s at least): a trainer
    that works silently is seen working before its silence could make it Stalled."""
    timeout = stalls.timeout_of(job)
    return max(1.0, min(SAMPLE_SECONDS, timeout / 3)) if timeout else SAMPLE_SECONDS


def sample(job: Job, engine: Engine) -> bool:
    """Sample a running job's workers through its engine, if due (whether it was); an engine out of reach is
    tried next time."""
    if not isinstance(engine, UsageSampler):
        return False
    if job.state != JobState.RUNNING or not sampled.due(job.pk, interval_of(job)):
        return False
    try:
        samples = engine.sample_usage(job)
    except TransientEngineError as exc:
        log.info("cannot sample %s: %s", job.uid, exc)
        return True
    record(job, samples)
    return True


def forget(job_id: int) -> None:
    sampled.forget(job_id)


def live(worker: Worker) -> dict[str, Any] | None:
    """The usage the API shows: the latest sample while the worker runs; None before it and once it ended
    (what it used over its run stays in its history and the ledger)."""
    return worker.usage if worker.state == "running" else None
