"""Benchmark: experiments at scale, and ASHA against grid search.

    .venv/bin/python bench/experiments.py [--trials 1000] [--waiting 10000] [--users 20] [--page-trials 200]

1. Create: POST /api/v1/experiments of a `--trials` grid (one request) on the embedded default (SQLite): the
   answer's time (goal <= 2 s).
2. Cycle: one scheduling cycle with `--waiting` trials' jobs of `--users` users waiting, twice: none could ever
   fit, and a full datacenter in which each would fit once others end (goal <= 100 ms).
3. Page: the experiment page and its curves.json with `--page-trials` trials of 1,000 metric points each: the
   server's time for each, the curves' first answer (median of 5, the cache cleared before each) and a repeated
   one (cached once the trials ended) (goal <= 300 ms; the browser's own time is the browser tests' to show).
4. ASHA against grid on a synthetic objective whose curves are known (the real rule, experiments.asha, in a
   simulation of 4 workers): the core-hours each spends to find a configuration within 5% of the best
   (goal: ASHA <= 1/3 of grid's).
Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))


def timed(call, repeat: int = 5) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, answer = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - began)
    return statistics.median(times), answer


def create_figure(trials: int, work: Path) -> None:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from bench.scheduler import datacenter

    dc = datacenter(work / "pfs", name="local")
    owner = User.objects.create_user("alice", "alice@example.com", "x")
    (Path(dc.storage_root) / "home" / "alice" / "jobs" / "grid").mkdir(parents=True)
    (Path(dc.storage_root) / "home" / "alice" / "jobs" / "grid" / "train.py").write_text("print(1)\n")
    api = APIClient(SERVER_NAME="localhost")  # the embedded default allows loopback hosts only
    api.force_authenticate(owner)
    side = next(d for d in range(math.isqrt(trials), 0, -1) if trials % d == 0)  # side x (trials / side)
    body = {"params": {"lr": {"values": list(range(side))}, "batch": {"values": list(range(trials // side))}},
            "template": {"entry": "python train.py", "cpu": "0.5", "package": "/pfs/local/home/alice/jobs/grid"}}
    times = []
    for attempt in range(3):
        began = time.perf_counter()
        answer = api.post("/api/v1/experiments", {**body, "name": f"grid{attempt}"}, format="json")
        times.append(time.perf_counter() - began)
        assert answer.status_code == 201, answer.json()
        api.post(f"/api/v1/experiments/grid{attempt}/kill")
    made = answer.json()["trials"]["total"]
    print(f"create: a {made}-trial grid in one POST: median {statistics.median(times) * 1000:.0f} ms "
          f"(max {max(times) * 1000:.0f} ms) over {len(times)} (goal <= 2000 ms)")


def cycle_figure(waiting: int, users: int, work: Path) -> None:
    from django.contrib.auth.models import User

    from bench.scheduler import datacenter
    from jobs.models import Job
    from jobs.scheduling import cycle

    dc = datacenter(work / "pfs-cycle", name="cycle", capacity_cpu="64", capacity_memory="1Ti")
    owners = [User.objects.create_user(f"user{u}", f"user{u}@example.com", "x") for u in range(users)]
    rows = [Job(owner=owners[i % users], datacenter=dc, name=f"sweep{i % users}-{i}", uid=f"t{i}-bench",
                spec={"params": {"lr": i}}, cpu_request=1, memory_request=2**30) for i in range(waiting)]  # fmt: skip
    Job.objects.bulk_create(rows, batch_size=1000)
    Job.objects.filter(datacenter=dc).update(cpu_request=100)  # none fits: each cycle looks at all and admits none
    median, _ = timed(lambda: cycle.schedule(dc), repeat=10)
    print(f"cycle: {waiting} waiting trials of {users} users, none could ever fit: median {median * 1000:.1f} ms "
          f"(goal <= 100 ms)")
    # A full datacenter: every trial would fit an empty one, 64 of them hold all of it; each waiting one is looked
    # at, blocked by capacity, and holds its request for those behind it (backfill).
    Job.objects.filter(datacenter=dc).update(cpu_request=1)
    cycle.schedule(dc)
    running = Job.objects.filter(datacenter=dc, admitted_at__isnull=False).count()
    median, _ = timed(lambda: cycle.schedule(dc), repeat=10)
    print(f"cycle: {waiting - running} waiting trials of {users} users, {running} running fill the datacenter: "
          f"median {median * 1000:.1f} ms (goal <= 100 ms)")
    Job.objects.filter(datacenter=dc).delete()


def page_figures(trials: int, work: Path) -> None:
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.test import Client
    from django.utils import timezone

    from datacenters.models import Datacenter
    from experiments.models import Experiment, Trial
    from jobs.models import Job, JobState

    dc = Datacenter.objects.get(name="local")
    owner = User.objects.get(username="alice")
    sweep = {"name": "page", "params": {"lr": {"min": 1e-4, "max": 1, "log": True}}, "search": "random",
             "max_trials": trials, "metric": {"name": "loss"}}  # fmt: skip
    experiment = Experiment.objects.create(uid="page-bench", name="page", owner=owner, datacenter=dc,
                                           template={}, sweep=sweep, state="succeeded")  # fmt: skip
    rng = random.Random(3)
    for index in range(trials):
        lr = 10 ** rng.uniform(-4, 0)
        job = Job.objects.create(owner=owner, datacenter=dc, name=f"page-{index}", uid=f"page-{index}-b",
                                 spec={"params": {"lr": lr}}, state=JobState.SUCCEEDED, released=True,
                                 cpu_request=1, memory_request=2**30, admitted_at=timezone.now())  # fmt: skip
        folder = Path(dc.storage_root, "home", "alice", "jobs", job.name, "output", job.uid, "trainer_0")
        folder.mkdir(parents=True)
        floor = abs(math.log10(lr) + 2)
        lines = (json.dumps({"step": s, "time": 0.0, "values": {"loss": floor + 1 / (s + 1)}}) for s in range(1000))
        (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        Trial.objects.create(experiment=experiment, index=index, params={"lr": lr}, job=job, state="succeeded",
                             best=floor + 0.001, last=floor + 0.001, steps=999)  # fmt: skip
    browser = Client(SERVER_NAME="localhost")
    browser.force_login(owner)
    page, answer = timed(lambda: browser.get("/experiments/page-bench/"))
    assert answer.status_code == 200  # type: ignore[attr-defined]
    def first_read():  # type: ignore[no-untyped-def]
        cache.clear()  # the released trials' curves are cached: each of these reads every metrics file again
        return browser.get("/experiments/page-bench/curves.json")

    first, answer = timed(first_read)
    again, _ = timed(lambda: browser.get("/experiments/page-bench/curves.json"), repeat=5)
    drawn = len(answer.json()["runs"])  # type: ignore[attr-defined]
    print(f"page: {trials} trials x 1000 points: the page {page * 1000:.0f} ms; curves.json ({drawn} curves of "
          f"the best trials) {first * 1000:.0f} ms first, {again * 1000:.0f} ms again (server time; goal <= 300 ms)")


def _curve(floor: float, step: int) -> float:
    return floor * (1 + 4 / (1 + step / 20))  # falls towards `floor`; never crosses another configuration's


def asha_figure(configurations: int = 81, max_steps: int = 810, workers: int = 4) -> None:
    from experiments import asha
    from experiments.search import Asha, Metric

    rng = random.Random(11)
    floors = [0.1 + rng.random() for _ in range(configurations)]
    best = min(floors)
    rule, metric = Asha(min_steps=10, max_steps=max_steps, reduction=3), Metric("loss")
    rungs = rule.rungs()
    # Grid: every configuration runs to max_steps; the best is found once its run ends (in trial order).
    grid_cost = sum(max_steps for _ in floors)
    # ASHA: `workers` run trials at once, one step a time unit; at each rung the rule decides.
    reported: dict[int, list[float]] = {}
    events: list[tuple[int, int, int]] = []  # (time the trial reaches its next rung or its end, trial, rung index)
    queue, cost, now = list(range(configurations)), 0, 0
    found_at_cost = None
    finished: list[int] = []

    def start(trial: int, at: int) -> None:
        heapq.heappush(events, (at + rungs[0], trial, 0))

    for _ in range(workers):
        start(queue.pop(0), 0)
    while events:
        now, trial, rung = heapq.heappop(events)
        if rung < len(rungs):
            value = _curve(floors[trial], rungs[rung])
            reported.setdefault(rung, []).append(value)
            if asha.stops(value, reported[rung], metric, rule.reduction):
                cost += rungs[rung]
                if queue:
                    start(queue.pop(0), now)
                continue
            following = rungs[rung + 1] if rung + 1 < len(rungs) else max_steps
            heapq.heappush(events, (now + following - rungs[rung], trial, rung + 1))
            continue
        cost += max_steps
        finished.append(trial)
        if found_at_cost is None and floors[trial] <= best * 1.05:
            found_at_cost = cost
        if queue:
            start(queue.pop(0), now)
    survivors = min(floors[t] for t in finished)
    print(f"asha: {configurations} configurations, rungs {rungs}, {workers} at once: {cost} trial-steps in all "
          f"({cost / grid_cost:.2f} of grid's {grid_cost}); the best it ran to the end is within "
          f"{(survivors / best - 1) * 100:.1f}% of the best; found one within 5% after "
          f"{found_at_cost} trial-steps (goal: all of ASHA <= 1/3 of grid)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--waiting", type=int, default=10000)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--page-trials", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-experiments-") as work:
        from bench.load import setup_django

        setup_django(Path(work) / "var", "", "")
        create_figure(args.trials, Path(work))
        cycle_figure(args.waiting, args.users, Path(work))
        page_figures(args.page_trials, Path(work))
    asha_figure()


if __name__ == "__main__":
    main()
