"""Benchmark: the scheduler's cycle over a long queue, its fairness against weights, and makespan on real jobs.

    .venv/bin/python bench/scheduler.py [--queued 1000] [--users 20] [--jobs 20] [--skip-real]

1. Cycle: a private SQLite database (the embedded default) with `--queued` waiting jobs from `--users`
   users (1-4 cores each) and a full datacenter: the median time of one `jobs.scheduling.cycle.schedule`
   (goal <= 100 ms), and of a cycle that admits what a freed datacenter takes.
2. Fairness: the real policy (`jobs.scheduling.policy.plan`) drives a simulated 8-core datacenter for
   1,500 one-core jobs each, of 10 time units, from 4 always-busy users weighted 1, 1, 2, 4, with past usage
   decayed as the ledger decays it; prints each user's share of the core-time against their weight's
   share, and Jain's index of usage / weight (goal >= 0.95).
3. Makespan (real jobs, local engine, the host's capacity): `--jobs` one-core trainings submitted at
   once, against the same trainings run one after another; prints makespan / (serial time / slots),
   where slots is how many run at once (goal <= 1.05), and makespan / serial.
Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

# A CPU-bound training of a fixed amount of work (~1-2 s on one core), so overlap shows as slowdown.
TRAINER = (
    "import time\nt = time.time()\nx = 0\nfor i in range(6_000_000):\n    x += i * i\n"
    "print(f'step 0 loss 1.0 ({time.time() - t:.2f}s)', flush=True)\n"
)


def setup_django(var_dir: Path) -> dict[str, str]:
    """bench/load.py's private stack, on its embedded defaults: SQLite in `var_dir`, the pcfs:// broker."""
    from bench.load import setup_django as private_stack

    return private_stack(var_dir, "", "")


def datacenter(pfs: Path, name: str = "local", **fields: Any) -> Any:
    from datacenters.models import Datacenter, Engine, StorageKind

    (pfs / "home").mkdir(parents=True, exist_ok=True)
    (pfs / "public").mkdir(exist_ok=True)
    return Datacenter.objects.create(name=name, engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL,
                                     storage_root=str(pfs), default_cpu="10000", default_memory="100Ti",
                                     default_jobs=100000, max_queued_jobs=10000, **fields)  # fmt: skip


def cycle_figures(queued: int, users: int, work: Path) -> None:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from jobs.models import Job, JobState
    from jobs.scheduling import cycle

    dc = datacenter(work / "pfs", name="cycle", capacity_cpu="64", capacity_memory="1Ti")
    owners = [User.objects.create_user(f"user{u}", f"user{u}@example.com", "x") for u in range(users)]
    rng = random.Random(7)
    rows = [
        Job(owner=owners[i % users], datacenter=dc, name=f"q{i}", uid=f"q{i}-bench", spec={},
            cpu_request=rng.randint(1, 4), memory_request=2**30)
        for i in range(queued)
    ]  # fmt: skip
    rows += [
        Job(owner=owners[i % users], datacenter=dc, name=f"r{i}", uid=f"r{i}-bench", spec={}, state=JobState.RUNNING,
            cpu_request=4, memory_request=2**30, admitted_at=timezone.now())
        for i in range(16)
    ]  # fmt: skip
    Job.objects.bulk_create(rows, batch_size=500)
    full = []
    for _ in range(20):
        began = time.perf_counter()
        admitted = cycle.schedule(dc) or []
        full.append(time.perf_counter() - began)
        assert not admitted
    Job.objects.filter(state=JobState.RUNNING).update(state=JobState.SUCCEEDED, released=True)
    began = time.perf_counter()
    admitted = cycle.schedule(dc) or []
    freed = time.perf_counter() - began
    print(f"cycle: {queued} waiting jobs from {users} users, datacenter full: median "
          f"{statistics.median(full) * 1000:.1f} ms (max {max(full) * 1000:.1f} ms) over {len(full)} cycles; "
          f"the cycle after 64 cores freed admitted {len(admitted)} jobs in {freed * 1000:.1f} ms")  # fmt: skip
    Job.objects.filter(datacenter=dc).delete()  # the real jobs' workers must not start these


def fairness_figures() -> None:
    from jobs.scheduling import policy, shapes

    weights = {1: 1.0, 2: 1.0, 3: 2.0, 4: 4.0}
    capacity, duration, half_life, horizon = 8.0, 10.0, 400.0, 2500.0
    backlog = {owner: 0 for owner in weights}
    ids = iter(range(1, 10**9))
    # More than the horizon can run, so every user always waits (fairness is about who goes next).
    queue = [shapes.Candidate(next(ids), o, 100, 0.0, shapes.Amount(1.0, 0, 0)) for o in weights for _ in range(1500)]
    running: list[tuple[float, int, int]] = []  # (ends, job, owner)
    past = dict.fromkeys(weights, 0.0)  # decayed core-seconds
    used = dict.fromkeys(weights, 0.0)
    now = 0.0
    while now < horizon and queue:
        while running and running[0][0] <= now:
            heapq.heappop(running)
        world = shapes.World(capacity=shapes.Bound(capacity, None, None), scale=shapes.Amount(capacity, 1, 1))
        for _, _, owner in running:
            world.owner_in_use[owner] = world.owner_in_use.get(owner, shapes.Amount()) + shapes.Amount(1.0, 0, 0)
            world.in_use = world.in_use + shapes.Amount(1.0, 0, 0)
        world.weights = dict(weights)
        world.past_share = {o: past[o] / capacity / half_life for o in weights}
        heads: dict[int, list[shapes.Candidate]] = {}
        for candidate in queue:  # as the cycle does: each user's first jobs, not the whole queue
            if len(heads.setdefault(candidate.owner_id, [])) < 20:
                heads[candidate.owner_id].append(candidate)
        looked = [c for group in heads.values() for c in group]
        by_id = {c.job_id: c for c in looked}
        for job_id in policy.plan(looked if len(running) < capacity else [], world).admit:
            heapq.heappush(running, (now + duration, job_id, by_id[job_id].owner_id))
        admitted = {j for _, j, _ in running}
        queue = [c for c in queue if c.job_id not in admitted]
        step = 1.0
        for owner in weights:
            held = sum(1 for _, _, o in running if o == owner)
            used[owner] += held * step
            past[owner] = past[owner] * math.pow(0.5, step / half_life) + held * step
        now += step
        backlog = {o: sum(1 for c in queue if c.owner_id == o) for o in weights}
    total, weight_sum = sum(used.values()), sum(weights.values())
    normalized = [used[o] / weights[o] for o in weights]
    jain = sum(normalized) ** 2 / (len(normalized) * sum(x * x for x in normalized))
    shares = ", ".join(f"user {o} (weight {weights[o]:g}): {used[o] / total:.3f} vs {weights[o] / weight_sum:.3f}"
                       for o in weights)  # fmt: skip
    print(f"fairness: {shares}; Jain index of usage/weight {jain:.3f} (jobs still waiting: {backlog})", flush=True)


@contextlib.contextmanager
def real_portal(work: Path, env: dict[str, str], trainer: str) -> Iterator[Callable[[list[str]], float]]:
    """A private portal on the embedded defaults with real workers (one per lane, as `make run`) and a local
    datacenter; yields `run(names)`: submit one one-core job of `trainer` per name at once, and the seconds until
    every one is final and released. Also used by bench/job_start.py."""
    from django.contrib.auth.models import User

    from accounts.models import issue_token
    from core import lanes
    from jobs.models import TERMINAL_STATES, Job
    from tests.servers import portal
    from tests.workers import start_worker

    dc = datacenter(work / "pfs-real")
    user = User.objects.create_user("bench", "bench@example.com", "x")
    package = Path(dc.storage_root) / "home" / "bench" / "jobs" / "t"
    package.mkdir(parents=True)
    (package / "train.py").write_text(trainer)
    token = issue_token(user).key
    spec = {"entry": "python train.py", "cpu": "1", "memory": "256Mi", "package": "/pfs/local/home/bench/jobs/t",
            "datacenter": "local"}
    workers = [
        start_worker(work, (lanes.JOBS,), concurrency=2, extra_env=env),
        start_worker(work, (lanes.CONTROL,), beat=True, concurrency=2, extra_env=env),
        start_worker(work, (lanes.SIDE, lanes.NOTIFY), concurrency=4, extra_env=env),
    ]
    import requests

    try:
        with portal(work, settings="portal.settings", **env) as url:
            headers = {"Authorization": f"Token {token}"}

            def run(names: list[str]) -> float:
                began = time.monotonic()
                for name in names:
                    answer = requests.post(f"{url}/api/v1/jobs", json={**spec, "jobname": name}, headers=headers,
                                           timeout=30)  # fmt: skip
                    if answer.status_code != 201:
                        raise SystemExit(f"submit {name}: {answer.status_code} {answer.text}")
                while Job.objects.filter(name__in=names, state__in=TERMINAL_STATES, released=True).count() < len(names):
                    time.sleep(0.05)
                return time.monotonic() - began

            run(["warm"])  # the runtime's environment, built once
            yield run
    finally:
        for worker in workers:
            worker.stop()


def makespan_figures(count: int, work: Path, env: dict[str, str]) -> None:
    from datacenters.capacity import capacity
    from datacenters.models import Datacenter
    from jobs.models import Job

    with real_portal(work, env, TRAINER) as run:
        serial = sum(run([f"s{i}"]) for i in range(count))
        makespan = run([f"p{i}" for i in range(count)])
    slots = int(capacity(Datacenter.objects.get(name="local")).cpu or 1)
    bad = Job.objects.exclude(state="succeeded").count()

    def run_time(prefix: str) -> float:
        spans = [(j.finished_at - j.started_at).total_seconds() for j in Job.objects.filter(name__startswith=prefix)
                 if j.started_at and j.finished_at]  # fmt: skip
        return statistics.mean(spans) if spans else float("nan")

    print(f"makespan: {count} one-core trainings on {slots} cores: one after another {serial:.1f} s; all submitted "
          f"at once {makespan:.1f} s = {makespan / (serial / slots):.2f}x the serial time / {slots} slots, "
          f"{makespan / serial:.2f}x serial ({bad} not succeeded); a job's own run (running -> final) took "
          f"{run_time('s'):.2f} s alone and {run_time('p'):.2f} s two at a time", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=1000)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--skip-real", action="store_true", help="skip the makespan of real jobs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        work = Path(tmp)
        env = setup_django(work / "var")
        cycle_figures(args.queued, args.users, work)
        fairness_figures()
        if not args.skip_real:
            makespan_figures(args.jobs, work, env)


if __name__ == "__main__":
    main()
