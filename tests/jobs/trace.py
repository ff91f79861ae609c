"""A trace of jobs replayed through the real scheduler on a virtual clock: for the forecast's test and bench.

The database, the scheduling cycle (jobs.scheduling.cycle.schedule), the ledger (fair share) and the forecast are
the real ones; what is virtual is time (django.utils.timezone.now is the trace's clock) and the jobs' runs: an
admitted job "runs" from the cycle that admits it for exactly its duration, then succeeds and is released, with
its ledger written, as the reconciler would. So the order and times the scheduler really gives can be compared
with what the forecast said when each job was submitted.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from unittest import mock

from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job, JobState, Role, Worker
from jobs.scheduling import cycle, ledger

GI = 1024**3


@dataclass(frozen=True)
class Run:
    name: str
    owner: User
    submit: float  # seconds after the trace's start
    seconds: float  # how long it really runs
    cores: int = 1


@dataclass
class Seen:
    """What became of one run: its real submit, start and end (seconds after the trace's start)."""

    submitted: float
    started: float | None = None
    ended: float | None = None
    job_id: int = 0


@dataclass
class Clock:
    now: datetime = field(default_factory=timezone.now)

    def __call__(self) -> datetime:
        return self.now


@contextmanager
def virtual(clock: Clock) -> Iterator[Clock]:
    with mock.patch("django.utils.timezone.now", clock):
        yield clock


def spec(name: str, cores: int) -> dict[str, object]:
    return {"jobname": name, "entry": "python train.py", "parallelism": 1, "pservers": 0, "cpu": str(cores),
            "memory": "1Gi"}  # fmt: skip


def finished_before(dc: Datacenter, run: Run, seconds: float, ago: timedelta) -> None:
    """A past succeeded run of the same name and owner: the history an estimate may rest on."""
    ended = timezone.now() - ago
    Job.objects.create(owner=run.owner, datacenter=dc, name=run.name, uid=f"{run.name}-{run.owner.username}-{ago}",
                       spec=spec(run.name, run.cores), state=JobState.SUCCEEDED, cpu_request=Decimal(run.cores),
                       memory_request=GI, released=True, started_at=ended - timedelta(seconds=seconds),
                       finished_at=ended)  # fmt: skip


def replay_trace(
    dc: Datacenter, runs: list[Run], clock: Clock, on_submit: Callable[[float, list[Run], dict[str, Seen]], None]
) -> dict[str, Seen]:
    """Submit each run at its time, admit with the real cycle after every change, end each on time; `on_submit`
    is called after the cycle that followed each submission (with the seconds since the start and the runs just
    submitted). Returns what became of every run."""
    start = clock.now
    seen: dict[str, Seen] = {}
    arrivals = sorted(runs, key=lambda r: r.submit)
    ends: list[tuple[float, str]] = []
    by_name = {run.name: run for run in runs}
    while arrivals or ends:
        moment = min(([arrivals[0].submit] if arrivals else []) + ([ends[0][0]] if ends else []))
        clock.now = start + timedelta(seconds=moment)
        while ends and ends[0][0] <= moment:
            _, name = heapq.heappop(ends)
            _end(seen[name], clock.now, moment)
        submitted = []
        while arrivals and arrivals[0].submit <= moment:
            run = arrivals.pop(0)
            seen[run.name] = Seen(moment, job_id=_submit(dc, run, clock.now).pk)
            submitted.append(run)
        for job_id in cycle.schedule(dc) or []:
            name = next(n for n, s in seen.items() if s.job_id == job_id)
            seen[name].started = moment
            Job.objects.filter(pk=job_id).update(state=JobState.RUNNING, started_at=clock.now)
            Worker.objects.filter(job_id=job_id).update(state=JobState.RUNNING, started_at=clock.now)
            heapq.heappush(ends, (moment + by_name[name].seconds, name))
        if submitted:
            on_submit(moment, submitted, seen)
    return seen


def _submit(dc: Datacenter, run: Run, now: datetime) -> Job:
    job = Job.objects.create(owner=run.owner, datacenter=dc, name=run.name, uid=f"{run.name}-{run.owner.username}",
                             spec=spec(run.name, run.cores), cpu_request=Decimal(run.cores), memory_request=GI,
                             queued_at=now)  # fmt: skip
    Worker.objects.create(job=job, role=Role.TRAINER, index=0)
    return job


def _end(seen: Seen, now: datetime, moment: float) -> None:
    seen.ended = moment
    Job.objects.filter(pk=seen.job_id).update(state=JobState.SUCCEEDED, finished_at=now, released=True)
    ledger.record(Job.objects.get(pk=seen.job_id), now=now)
