"""Benchmark: 200 concurrent submits from 10 users on the local engine, time until every job is final.

    .venv/bin/python bench/load.py                          # the embedded stack (SQLite, pcfs:// broker)
    .venv/bin/python bench/load.py --database-url postgresql://u:p@127.0.0.1/postgres --broker-url redis://127.0.0.1:6390/0

For each stack it makes a private var directory (and, on PostgreSQL, a private database), starts the
portal under gunicorn (portal/gunicorn_conf.py: gevent workers; one process) and one Celery worker per
lane (jobs 2 slots, control with beat 2 threads, side 4 threads), creates the users, then each user's thread
posts its jobs over HTTP as fast as the portal answers, all users at once. Each job is a trivial
trainer (prints a line, exits 0) in the real sandbox. Prints the time from the first POST to every
job final (and released), how many POSTs failed, and the reconciles the control worker discarded as
expired. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

TRAINER = 'print("step 0 loss 1.0", flush=True)\n'


def setup_django(var_dir: Path, database_url: str, broker_url: str) -> dict[str, str]:
    env = {
        "PADDLECLOUD_VAR_DIR": str(var_dir),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "LOG_LEVEL": "WARNING",
        "DATABASE_URL": database_url or f"sqlite:///{var_dir / 'db.sqlite3'}",
        "CELERY_BROKER_URL": broker_url,
        "PADDLECLOUD_CACHE_URL": "",
    }
    for name, value in env.items():
        if value:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return {name: value for name, value in env.items() if value}


def private_database(url: str) -> str:
    """A fresh database beside the one `url` names (dropped never: the bench says its name)."""
    import psycopg

    name = f"bench_load_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return re.sub(r"/[^/]*$", f"/{name}", url)


def world(users: int, per_user: int, pfs: Path) -> tuple[list[str], Any]:
    from django.contrib.auth.models import User

    from accounts.models import issue_token
    from datacenters.models import Datacenter, Engine, StorageKind

    (pfs / "public").mkdir(parents=True)
    dc = Datacenter.objects.create(
        name="local", engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL, storage_root=str(pfs),
        default_cpu="10000", default_memory="100Ti", default_jobs=100000,
        # The control plane is measured, not the scheduler's queue (bench/scheduler.py): room for every job.
        capacity_cpu="10000", capacity_memory="100Ti", max_queued_jobs=10000,
    )  # fmt: skip
    tokens = []
    for u in range(users):
        user = User.objects.create_user(f"user{u}", f"user{u}@example.com", uuid.uuid4().hex)
        tokens.append(issue_token(user).key)
        for j in range(per_user):
            package = pfs / "home" / user.username / "jobs" / f"j{j}"
            package.mkdir(parents=True)
            (package / "train.py").write_text(TRAINER)
    return tokens, dc


def submit_all(url: str, tokens: list[str], per_user: int) -> list[str]:
    failures: list[str] = []

    def one_user(token: str) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        for j in range(per_user):
            spec = {"jobname": f"j{j}", "entry": "python train.py", "parallelism": 1, "pservers": 0}
            answer = session.post(f"{url}/api/v1/jobs", json=spec, timeout=60)
            if answer.status_code != 201:
                failures.append(f"{answer.status_code} {answer.text[:200]}")

    threads = [threading.Thread(target=one_user, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def run_stack(label: str, users: int, per_user: int, database_url: str, broker_url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        work = Path(tmp)
        env = setup_django(work / "var", private_database(database_url) if database_url else "", broker_url)
        from core import lanes
        from jobs.models import TERMINAL_STATES, Job
        from tests.servers import portal
        from tests.workers import start_worker

        tokens, _ = world(users, per_user, work / "pfs")
        started = [
            start_worker(work, (lanes.JOBS,), concurrency=2, extra_env=env),
            start_worker(work, (lanes.CONTROL,), beat=True, concurrency=2, extra_env=env),
            start_worker(work, (lanes.SIDE, lanes.NOTIFY), concurrency=4, extra_env=env),
        ]
        try:
            with portal(work, settings="portal.settings", **env) as url:
                total = users * per_user
                began = time.monotonic()
                failures = submit_all(url, tokens, per_user)
                posted = time.monotonic() - began
                expected = total - len(failures)
                while Job.objects.filter(state__in=TERMINAL_STATES, released=True).count() < expected:
                    if time.monotonic() - began > 900:
                        raise SystemExit(f"{label}: not all final after 900 s")
                    time.sleep(0.2)
                final = time.monotonic() - began
        finally:
            for worker in started:
                worker.stop()
        states = dict(Counter(str(state) for state in Job.objects.values_list("state", flat=True)))
        discarded = started[1].log().count("expired")
        print(
            f"{label}: {total} submits from {users} users posted in {posted:.1f}s ({len(failures)} failed); "
            f"all final in {final:.1f}s; states {states}; reconciles discarded as expired: {discarded}",
            flush=True,
        )
        for failure in failures[:5]:
            print(f"  failed POST: {failure}")
        print_phases(Job.objects.values_list("created_at", "submitted_at", "started_at", "finished_at"))


def print_phases(rows: Any) -> None:
    """Where the time went, per job: queued -> submitted (submit_job ran), -> running recorded, -> final."""
    phases: dict[str, list[float]] = {"queued -> pending": [], "pending -> running": [], "running -> final": []}
    for created, submitted, started, finished in rows:
        if submitted and started and finished:
            phases["queued -> pending"].append((submitted - created).total_seconds())
            phases["pending -> running"].append((started - submitted).total_seconds())
            phases["running -> final"].append((finished - started).total_seconds())
    for name, values in phases.items():
        if values:
            ordered = sorted(values)
            p95 = ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]
            print(f"  {name}: p50 {statistics.median(values):.2f}s p95 {p95:.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--jobs-per-user", type=int, default=20)
    parser.add_argument("--database-url", default="", help="PostgreSQL server to make a private database on")
    parser.add_argument("--broker-url", default="", help="Redis URL (default: the embedded pcfs:// broker)")
    args = parser.parse_args()
    label = "PostgreSQL + Redis" if args.database_url else "embedded (SQLite + pcfs://)"
    run_stack(label, args.users, args.jobs_per_user, args.database_url, args.broker_url)


if __name__ == "__main__":
    main()
