"""Benchmark: how well the queue's forecasts (jobs.scheduling.forecast) foretell what the scheduler then does.

    .venv/bin/python bench/forecast.py [--jobs 50] [--users 4] [--seed 3] [--queued 10000]

A trace of `--jobs` one- and two-core jobs from `--users` users on a 2-core capacity is replayed through the real
scheduler, ledger and database on a virtual clock (tests/jobs/trace.py); each job's name ran three times before, so
the forecast's durations rest on history. Two cases:
1. All submitted at once, each running exactly as long as its history: the forecast's own error (goal: 0 s, and no
   job started out of its forecast order).
2. Poisson arrivals over the trace's span, each run +-20% of its history's median: the mean absolute error of
   `estimated_start` at submit as a share of the mean real wait (goal <= 20%), and the pairs of waiting jobs
   (forecast together at a submit) that started in the other order than forecast (goal 0; later arrivals and
   shorter or longer runs than history move them).
3. Cost: the time of one forecast (`forecast.places`, what the queue API, page and a waiting job's page compute)
   with `--queued` waiting jobs from 20 users and 16 running, each name with history (median of 5).
4. ETA at 25% progress: the progress ETA (jobs.follow.progress, over the trainer's metric points) of runs whose
   steps vary +-30% with a slower first 5%, against the real remaining time (goal <= 15% mean error).
Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

CASES = itertools.count(1)
KINDS = (60, 150, 300, 600)  # seconds: the median runs of the names users submit


def trace_case(jobs: int, users: int, rng: random.Random, spread: float, arrivals: bool, work: Path) -> None:
    from django.contrib.auth.models import User

    from bench.scheduler import datacenter
    from jobs.models import Job
    from jobs.scheduling import forecast
    from tests.jobs.trace import Clock, Run, Seen, finished_before, replay_trace, virtual

    tag = "arrivals" if arrivals else "at-once"
    case = next(CASES)
    dc = datacenter(work / f"pfs-{case}", name=f"case-{case}", capacity_cpu="2", capacity_memory="64Gi")
    owners = [User.objects.create_user(f"c{case}u{u}", f"c{case}u{u}@example.com", "x") for u in range(users)]
    kinds = {(o.pk, k): rng.choice(KINDS) for o in owners for k in range(3)}
    runs, at = [], 0.0
    mean_gap = statistics.mean(KINDS) * 1.2 / 2  # a little more work arrives than 2 cores do: a queue builds
    for index in range(jobs):
        owner, kind = rng.choice(owners), rng.randrange(3)
        median = kinds[(owner.pk, kind)]
        seconds = median * rng.uniform(1 - spread, 1 + spread)
        runs.append(Run(f"k{kind}-{index}", owner, at if arrivals else 0.0, round(seconds), rng.choice((1, 1, 2))))
        at += rng.expovariate(1 / mean_gap)
    for run in runs:
        for ago in (3, 4, 5):
            finished_before(dc, run, kinds[(run.owner.pk, int(run.name[1]))], timedelta(days=ago, seconds=run.submit))
    said: dict[str, Any] = {}
    orders: list[list[str]] = []

    def look(moment: float, submitted: list[Run], seen: dict[str, Seen]) -> None:
        ids = {s.job_id: name for name, s in seen.items()}
        places = {ids[j]: p for j, p in forecast.places(dc).items() if j in ids}
        for run in submitted:
            if run.name in places:
                said[run.name] = (moment, places[run.name])
        orders.append(sorted((n for n in places if places[n].estimated_start), key=lambda n: places[n].position or 0))

    clock = Clock()
    with virtual(clock):
        start = clock.now
        seen = replay_trace(dc, runs, clock, look)
    print(f"{tag}: {len(runs)} jobs from {users} users on 2 cores, runs {spread:.0%} around their history; "
          f"{figures(said, seen, orders, start)}", flush=True)  # fmt: skip
    Job.objects.filter(datacenter=dc).delete()


def figures(said: dict[str, Any], seen: dict[str, Any], orders: list[list[str]], start: Any) -> str:
    """The estimates' error against the real starts, and the pairs of jobs that started out of forecast order."""
    errors, waits, alone = [], [], []
    for name, (moment, place) in said.items():
        real = seen[name].started or 0.0
        waits.append(real - moment)
        if place.estimated_start is not None:
            errors.append(abs((place.estimated_start - start).total_seconds() - real))
            overtaken = any(s.submitted > moment and (s.started or 0) <= real for s in seen.values())
            if not overtaken:  # no later job started first: what the forecast could have known
                alone.append(errors[-1])
    pairs = discordant = 0
    for order in orders:
        for i, first in enumerate(order):
            for second in order[i + 1 :]:
                pairs += 1
                discordant += (seen[first].started or 0) > (seen[second].started or 0)
    bases = statistics.multimode(p.basis for _, p in said.values()) if said else []
    mae, wait = (statistics.mean(errors) if errors else 0.0), (statistics.mean(waits) if waits else 0.0)
    return (f"{len(said)} waited at submit ({len(errors)} with an estimate, basis {'/'.join(map(str, bases))}); "
          f"estimated_start MAE {mae:.1f} s = {mae / wait if wait else 0:.1%} of the mean real wait {wait:.0f} s; "
          f"pairs started out of forecast order: {discordant} of {pairs}; MAE over the {len(alone)} no later job "
          f"overtook: {statistics.mean(alone) if alone else 0:.1f} s")  # fmt: skip


def cost_case(queued: int, work: Path) -> None:
    import time

    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.utils import timezone

    from bench.scheduler import datacenter
    from jobs.models import Job, JobState
    from jobs.scheduling import forecast

    dc = datacenter(work / "pfs-cost", name="cost", capacity_cpu="64", capacity_memory="1Ti")
    owners = [User.objects.create_user(f"cost{u}", f"cost{u}@example.com", "x") for u in range(20)]
    rng, now = random.Random(7), timezone.now()
    rows = [Job(owner=owners[i % 20], datacenter=dc, name=f"q{i % 7}-{i}", uid=f"q{i}-cost", spec={},
                cpu_request=rng.randint(1, 4), memory_request=2**30) for i in range(queued)]  # fmt: skip
    rows += [Job(owner=owners[i % 20], datacenter=dc, name=f"r{i}", uid=f"r{i}-cost", spec={}, state=JobState.RUNNING,
                 cpu_request=4, memory_request=2**30, admitted_at=now, started_at=now) for i in range(16)]  # fmt: skip
    rows += [Job(owner=owners[i % 20], datacenter=dc, name=f"q{i % 7}-{i}", uid=f"h{i}-cost", spec={},
                 state=JobState.SUCCEEDED, released=True, cpu_request=1, memory_request=2**30,
                 started_at=now - timedelta(seconds=rng.randint(600, 3600)), finished_at=now)
             for i in range(500)]  # fmt: skip
    Job.objects.bulk_create(rows, batch_size=500)
    computed, kept = [], []
    for _ in range(10):
        cache.clear()
        began = time.perf_counter()
        places = forecast.places(dc)
        computed.append(time.perf_counter() - began)
        began = time.perf_counter()
        forecast.places(dc)
        kept.append(time.perf_counter() - began)
    estimated = sum(1 for p in places.values() if p.estimated_start)
    print(f"cost: one forecast of {queued} waiting jobs (the cycle looks at {len(places)}, {estimated} estimated): "
          f"computed median {statistics.median(computed) * 1000:.0f} ms (max {max(computed) * 1000:.0f} ms), "
          f"from the cache while the queue is unchanged median {statistics.median(kept) * 1000:.0f} ms, over 10",
          flush=True)  # fmt: skip


def eta_case(jobs: int, rng: random.Random) -> None:
    from jobs.follow import progress

    errors = []
    for _ in range(jobs):
        total, mean_step = rng.choice((200, 600, 2000)), rng.uniform(0.2, 2.0)
        steps = [mean_step * rng.uniform(0.7, 1.3) * (2.0 if i < total * 0.05 else 1.0) for i in range(total)]
        times, now = [], 0.0
        for step_time in steps:
            now += step_time
            times.append(now)
        quarter = total // 4
        points = [{"step": i, "total_steps": total, "time": times[i]} for i in range(quarter)]
        eta = progress.of_points(points)
        if eta and eta["eta_seconds"] is not None:
            real = times[-1] - times[quarter - 1]
            errors.append(abs(eta["eta_seconds"] - real) / real)
    print(f"eta at 25% progress: mean error {statistics.mean(errors):.1%} (max {max(errors):.1%}) over {len(errors)} "
          "runs whose steps vary +-30%, the first 5% at half speed", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--queued", type=int, default=10000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-forecast-") as tmp:
        from bench.scheduler import setup_django

        setup_django(Path(tmp) / "var")
        trace_case(args.jobs, args.users, random.Random(args.seed), 0.0, False, Path(tmp))
        trace_case(args.jobs, args.users, random.Random(args.seed), 0.2, True, Path(tmp))
        cost_case(args.queued, Path(tmp))
        eta_case(args.jobs, random.Random(args.seed))


if __name__ == "__main__":
    main()
