"""Looks at running jobs apart from the reconcile cycle: each worker's resource use (jobs.follow.worker_usage) and the
job's progress (jobs.follow.progress), by the beat's `jobs.sample_usage` task.

Apart on purpose: a kubelet that does not answer, or a slow PFS, costs this task its time, never a job's state
change; and at thousands of running jobs these looks (a file or kubelet read each) would outgrow a 2 s cycle.
A run takes the least recently sampled jobs first and stops after RUN_SECONDS; the rest wait for the next tick,
so each job is looked at less often as jobs pile up, and the reconciler never waits for it.
"""

from __future__ import annotations

import time

from jobs.engines import engine_for
from jobs.engines.base import Engine
from jobs.follow import progress, worker_usage
from jobs.models import Job, JobState

RUN_SECONDS = 1.0  # one run of the task stops after this long; what is left waits for the next tick
_BATCH = 50  # jobs loaded (with owner and datacenter) at a time


def sample_running() -> int:
    """Sample the running jobs that are due, least recently sampled first, until RUN_SECONDS is spent; the number
    of jobs sampled. Jobs are loaded a batch at a time, so thousands of running jobs cost a list of ids a run."""
    stop_at = time.monotonic() + RUN_SECONDS
    ids = list(Job.objects.filter(state=JobState.RUNNING).values_list("pk", flat=True))
    ids.sort(key=lambda pk: worker_usage.sampled.last(pk))
    engines: dict[int, Engine] = {}
    done = 0
    for start in range(0, len(ids), _BATCH):
        batch = Job.objects.filter(pk__in=ids[start : start + _BATCH]).select_related("owner", "datacenter")
        for job in sorted(batch, key=lambda job: worker_usage.sampled.last(job.pk)):
            if time.monotonic() > stop_at:
                return done
            if job.datacenter_id not in engines:  # one engine (and API client) per datacenter and run
                engines[job.datacenter_id] = engine_for(job.datacenter)
            engine = engines[job.datacenter_id]
            done += worker_usage.sample(job, engine)
            progress.check(job)
    return done
