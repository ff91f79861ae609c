"""Benchmark: goodput of a collective job whose ranks are killed, and how fast a restart resumes it.

    .venv/bin/python bench/resilience.py [--passes 120] [--pause 1.0] [--every 60] [--save-every 30]

A private stack on the embedded defaults (SQLite, the pcfs:// broker, the local engine, real Celery workers) runs
tests/jobs/collective_restart_package (a seeded 2-trainer gloo training, real PaddlePaddle, a checkpoint every
`--save-every` passes of about `--pause` s) twice: undisturbed, then with `-max-restarts 100` while the bench
SIGKILLs a random trainer's process group once each attempt has run `--every` s. Prints:
1. goodput: the undisturbed run's wall time (submit to end) over the disturbed run's: useful steps per wall second
   against the undisturbed run (goal >= 0.8 with checkpoints every 30 s and a kill every 60 s);
2. recovery: from each kill to the first step the next attempt logs, against a cold start (submit to the
   undisturbed run's first step): goal <= 1.5x;
3. whether both runs end with the same loss and weights (the restarts resumed, not restarted from scratch).
Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

PACKAGE = ROOT / "tests" / "jobs" / "collective_restart_package"


def first_steps(path: Path) -> list[float]:
    """The epoch time of each attempt's first metric point (its step went back, or it is the first)."""
    starts, last = [], None
    for line in path.read_text().splitlines() if path.exists() else []:
        point = json.loads(line)
        if last is None or point["step"] <= last:
            starts.append(float(point["time"]))
        last = point["step"]
    return starts


def run(api: Any, name: str, spec: dict[str, Any], kill_every: float | None, rng: random.Random) -> dict[str, Any]:
    from jobs.files import layout
    from jobs.models import TERMINAL_STATES, Job

    submitted = time.time()
    api(name, spec)
    kills: list[float] = []
    while not Job.objects.filter(name=name, state__in=TERMINAL_STATES, released=True).exists():
        time.sleep(0.5)
        job = Job.objects.get(name=name)
        began = job.started_at.timestamp() if job.started_at and job.state == "running" else None
        due = kill_every is not None and began is not None and time.time() - began >= kill_every
        due = due and (not kills or kills[-1] < (began or 0.0))  # one kill an attempt
        if due and (pids := [job.engine_data.get(f"trainer-{i}", {}).get("pid") for i in range(2)]):
            pid = rng.choice([p for p in pids if p])
            try:
                os.killpg(pid, signal.SIGKILL)
                kills.append(time.time())
            except ProcessLookupError:
                pass
    job = Job.objects.get(name=name)
    folder = layout.output_dir(job.datacenter, job.owner.username, name, job.uid)
    log = (folder / "trainer_0" / "log.txt").read_text()
    return {"job": job, "wall": (job.finished_at.timestamp() - submitted) if job.finished_at else float("nan"),
            "kills": kills, "firsts": first_steps(folder / "trainer_0" / "metrics.jsonl"), "submitted": submitted,
            "final": re.findall(r"final loss \S+ weights \S+", log)[-1:]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=120)
    parser.add_argument("--pause", type=float, default=1.0)
    parser.add_argument("--every", type=float, default=60.0)
    parser.add_argument("--save-every", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-resilience-") as tmp:
        from bench.scheduler import datacenter, setup_django

        work = Path(tmp)
        env = setup_django(work / "var")
        from django.contrib.auth.models import User

        from accounts.models import issue_token
        from core import lanes
        from tests.servers import portal
        from tests.workers import start_worker

        dc = datacenter(work / "pfs", preemption_grace=5)
        user = User.objects.create_user("bench", "bench@example.com", "x")
        token = issue_token(user).key
        spec = {"entry": "python train.py", "parallelism": 2, "pservers": 0, "passes": args.passes, "cpu": "0.5",
                "memory": "1Gi", "datacenter": "local",
                "env": {"PASS_PAUSE": str(args.pause), "SAVE_EVERY": str(args.save_every)}}  # fmt: skip
        workers = [
            start_worker(work, (lanes.JOBS,), concurrency=2, extra_env=env),
            start_worker(work, (lanes.CONTROL,), beat=True, concurrency=2, extra_env=env),
            start_worker(work, (lanes.SIDE, lanes.NOTIFY), concurrency=2, extra_env=env),
        ]
        import shutil

        import requests

        try:
            with portal(work, settings="portal.settings", **env) as url:

                def submit(name: str, body: dict[str, Any]) -> None:
                    home = Path(dc.storage_root) / "home" / "bench" / "jobs" / name
                    shutil.copytree(PACKAGE, home)
                    body = {**body, "jobname": name, "package": f"/pfs/local/home/bench/jobs/{name}"}
                    answer = requests.post(f"{url}/api/v1/jobs", json=body, headers={"Authorization": f"Token {token}"},
                                           timeout=30)  # fmt: skip
                    if answer.status_code != 201:
                        raise SystemExit(f"submit {name}: {answer.status_code} {answer.text}")

                rng = random.Random(1)
                run(submit, "warm", {**spec, "passes": 1}, None, rng)  # the runtime's environment, built once
                steady = run(submit, "steady", spec, None, rng)
                shaken = run(submit, "shaken", {**spec, "max_restarts": 100}, args.every, rng)
        finally:
            for worker in workers:
                worker.stop()
    cold = steady["firsts"][0] - steady["submitted"] if steady["firsts"] else float("nan")
    recoveries = [min((t for t in shaken["firsts"] if t > kill), default=float("nan")) - kill
                  for kill in shaken["kills"]]  # fmt: skip
    job = shaken["job"]
    print(f"goodput: undisturbed {steady['wall']:.0f} s, with a trainer killed every {args.every:.0f} s "
          f"({len(shaken['kills'])} kills, {job.restarts} restarts, {job.state}) {shaken['wall']:.0f} s: "
          f"{steady['wall'] / shaken['wall']:.2f} of the undisturbed rate (checkpoints every {args.save_every} passes "
          f"of ~{args.pause:g} s)", flush=True)  # fmt: skip
    if recoveries:
        print(f"recovery: kill to the next attempt's first step median {statistics.median(recoveries):.1f} s "
              f"(max {max(recoveries):.1f} s); a cold start (submit to first step) {cold:.1f} s: "
              f"{statistics.median(recoveries) / cold:.2f}x", flush=True)  # fmt: skip
    print(f"same end: {steady['final'] == shaken['final'] and bool(steady['final'])} "
          f"(undisturbed {steady['final']}, disturbed {shaken['final']})", flush=True)


if __name__ == "__main__":
    main()
