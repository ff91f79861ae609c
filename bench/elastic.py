"""Benchmark: makespan and mean completion of collective jobs, elastic against fixed-size, on the real scheduler.

    .venv/bin/python bench/elastic.py [--jobs 30] [--cores 8] [--seed 5] [--overhead 10] [--gap 45]

A trace of `--jobs` collective jobs of 2, 3 or 4 one-core trainers (work of 400, 800 or 1,600 trainer-seconds, scaling
perfectly; Poisson arrivals `--gap` s apart on average: more work arrives than the cores do) runs on a `--cores`
capacity twice: fixed-size (`-parallelism N`), then elastic (`-parallelism 1:N`). The database, the scheduling
cycle (admission with the sizes that fit, growth), the ledger and the requeue of a growing job
(jobs.follow.reconcile.requeue_preempted, with an engine whose workers are virtual) are the real ones; time is
virtual (tests/jobs/trace.py's clock), a cycle runs every 2 s, and each start costs `--overhead` seconds (a
restart from the checkpoint included). Prints both makespans and mean completion times (submit to end) and their
ratios (goal: elastic <= 0.85x). Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

TICK = 2.0  # seconds between two cycles of the beat
WORKS = (400.0, 800.0, 1600.0)  # trainer-seconds a job needs
SIZES = (2, 3, 4)  # its most trainers


class VirtualWorkers:
    """An engine whose workers are virtual: stopping and cleaning up always succeed at once."""

    def stop(self, job: Any, recorder: Any, grace: int | None = None) -> bool:
        return True

    def cleanup(self, job: Any, recorder: Any) -> bool:
        return True


@dataclass
class Running:
    job_id: int
    trainers: int
    began: float  # virtual seconds: its (re)start
    left: float  # trainer-seconds of work still to do at `began`


def run_trace(
    elastic: bool, jobs: int, cores: int, seed: int, overhead: float, gap: float, work: Path
) -> tuple[float, float]:
    from django.contrib.auth.models import User

    from bench.scheduler import datacenter
    from jobs.follow.reconcile import requeue_preempted
    from jobs.models import Job, JobState, Reason
    from jobs.scheduling import cycle, ledger
    from tests.jobs.trace import Clock, virtual

    rng = random.Random(seed)
    tag = "elastic" if elastic else "fixed"
    dc = datacenter(work / f"pfs-{tag}", name=tag, capacity_cpu=str(cores), capacity_memory="1Ti",
                    elastic_grow_after=60, preemption_grace=0)  # fmt: skip
    owners = [User.objects.create_user(f"{tag}{u}", f"{tag}{u}@example.com", "x") for u in range(4)]
    arrivals, at = [], 0.0
    for index in range(jobs):
        arrivals.append((at, index, rng.choice(owners), rng.choice(WORKS), rng.choice(SIZES)))
        at += rng.expovariate(1 / gap)
    spec = {"entry": "python train.py", "parallelism": 4, "pservers": 0, "cpu": "1", "memory": "1Gi"}
    submitted: dict[int, float] = {}
    ended: dict[int, float] = {}
    left: dict[int, float] = {}
    running: dict[int, Running] = {}
    clock = Clock()
    with virtual(clock):
        start = clock.now
        moment = 0.0
        while arrivals or running or len(ended) < jobs:
            clock.now = start + timedelta(seconds=moment)
            for job_id, run in list(running.items()):  # the jobs whose work is done end
                if moment >= run.began + overhead + run.left / run.trainers:
                    del running[job_id]
                    ended[job_id] = moment
                    Job.objects.filter(pk=job_id).update(state=JobState.SUCCEEDED, finished_at=clock.now, released=True)
                    ledger.record(Job.objects.get(pk=job_id), now=clock.now)
            while arrivals and arrivals[0][0] <= moment:
                _, index, owner, need, size = arrivals.pop(0)
                extra = {"min_trainers": 1, "max_trainers": size} if elastic else {}
                job = Job.objects.create(owner=owner, datacenter=dc, name=f"j{index}", uid=f"j{index}-{tag}",
                                         spec={**spec, "jobname": f"j{index}", "parallelism": size},
                                         cpu_request=Decimal(size), memory_request=size * 2**30, queued_at=clock.now,
                                         **extra)  # fmt: skip
                submitted[job.pk], left[job.pk] = moment, need
            cycle.schedule(dc)
            # Every admitted job starts (a requeue's own signal may have run a cycle too: read the rows).
            for job in Job.objects.filter(datacenter=dc, state=JobState.QUEUED, admitted_at__isnull=False,
                                          preempted_at__isnull=True):  # fmt: skip
                Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=clock.now)
                running[job.pk] = Running(job.pk, job.trainers, moment, left[job.pk])
            growing = Job.objects.filter(datacenter=dc, state=JobState.QUEUED, reason=Reason.RESIZING)
            for job in growing.exclude(preempted_at=None):
                run = running.pop(job.pk)  # it saved as it was stopped: its work so far is kept
                left[job.pk] = max(run.left - max(moment - run.began - overhead, 0.0) * run.trainers, 0.0)
                requeue_preempted(job, VirtualWorkers())  # type: ignore[arg-type]
            moment += TICK
    completions = [ended[j] - submitted[j] for j in ended]
    return max(ended.values()) - min(submitted.values()), statistics.mean(completions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--cores", type=int, default=8)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--overhead", type=float, default=10.0)
    parser.add_argument("--gap", type=float, default=45.0, help="mean seconds between two submits")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-elastic-") as tmp:
        from bench.scheduler import setup_django

        setup_django(Path(tmp) / "var")
        fixed = run_trace(False, args.jobs, args.cores, args.seed, args.overhead, args.gap, Path(tmp))
        elastic = run_trace(True, args.jobs, args.cores, args.seed, args.overhead, args.gap, Path(tmp))
    print(f"{args.jobs} collective jobs of 2-4 one-core trainers on {args.cores} cores, {args.overhead:g} s a start: "
          f"fixed-size makespan {fixed[0]:.0f} s, mean completion {fixed[1]:.0f} s; elastic (1:N) makespan "
          f"{elastic[0]:.0f} s ({elastic[0] / fixed[0]:.2f}x), mean completion {elastic[1]:.0f} s "
          f"({elastic[1] / fixed[1]:.2f}x)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
