"""Benchmark: the job list page and `GET /api/v1/jobs` for a user with 10,000 jobs, on the embedded default.

A private var directory (SQLite, as `make run` uses without DATABASE_URL), one user with N jobs (a few
running, the rest finished), requests through Django's in-process test client (the whole request:
middleware, session, query, template or serializer; no network). Prints p50/p95 of each, wall and CPU
time (goal p95 <= 25 ms at 100,000 jobs; the first and the last page), the page's p95 sorted by each column
it sorts by (a quarter of the requests each), and the SQL queries one request makes at small and large
page sizes, which must be the same (a count that grows with the page size is an N+1). Prints figures; it
is not a test.

    .venv/bin/python bench/pages.py [--jobs 10000] [--requests 200]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_django(var_dir: Path) -> None:
    os.environ["PADDLECLOUD_VAR_DIR"] = str(var_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["ALLOWED_HOSTS"] = "testserver"
    # As `make run` serves it (scripts/common.sh): DEBUG off (with it on, every query is logged and every template
    # node keeps its source: 10-20% of a list request, measured), the embedded portal's generated secrets.
    os.environ.setdefault("DEBUG", "false")
    os.environ.setdefault("PADDLECLOUD_EMBEDDED", "true")
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "PADDLECLOUD_CACHE_URL"):
        os.environ.pop(name, None)  # a private SQLite database, whatever the shell has
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def populate(count: int, storage: Path) -> Any:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.utils import timezone

    from datacenters.models import Datacenter, Engine, StorageKind
    from jobs.models import Job, JobState

    (storage / "home").mkdir(parents=True)
    dc = Datacenter.objects.create(name="local", engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL,
                                   storage_root=str(storage))
    user = User.objects.create_user("alice", "alice@example.com", "bench password")
    now = timezone.now()
    spec = {"entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": 4, "cpu": "1", "memory": "1Gi"}
    jobs = []
    for i in range(count):
        running = i >= count - 5  # the newest few still run: the list page polls
        created = now - timedelta(minutes=count - i)
        jobs.append(Job(
            owner=user, datacenter=dc, name=f"job-{i}", uid=f"job-{i}-{i % 99999:05d}", spec=spec,
            state=JobState.RUNNING if running else JobState.SUCCEEDED, released=not running,
            created_at=created, started_at=created + timedelta(seconds=5),
            finished_at=None if running else created + timedelta(seconds=65), exit_code=None if running else 0,
        ))
    Job.objects.bulk_create(jobs, batch_size=1000)
    return user


def timed(call: Callable[[], Any], requests: int, cpu: list[float] | None = None) -> list[float]:
    """Each request's wall time in ms (and its CPU time into `cpu`: what a busy machine's other work cannot add)."""
    call()  # warm: templates compiled, connection open
    times = []
    for _ in range(requests):
        start, start_cpu = time.perf_counter(), time.process_time()
        response = call()
        times.append((time.perf_counter() - start) * 1000)
        if cpu is not None:
            cpu.append((time.process_time() - start_cpu) * 1000)
        assert response.status_code == 200, response.status_code
    return times


def queries(call: Callable[[], Any]) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert call().status_code == 200
    return len(captured.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as tmp:
        setup_django(Path(tmp) / "var")
        from django.test import Client
        from rest_framework.test import APIClient

        from accounts.models import issue_token
        from jobs.web import views

        user = populate(args.jobs, Path(tmp) / "pfs")
        page = Client()
        page.force_login(user)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user).key}")
        print(f"{args.jobs} jobs of one user, SQLite, {args.requests} requests each")
        for name, call in (
            (f"job list page (/jobs/, {views.PAGE_SIZE} a page)", lambda: page.get("/jobs/")),
            ("job list page, self-refresh (htmx partial)", lambda: page.get("/jobs/", HTTP_HX_REQUEST="true")),
            # A page past the end is the last one (Django's get_page; "last" would be page 1).
            ("job list page, last page", lambda: page.get("/jobs/", {"page": str(args.jobs)})),
            ("GET /api/v1/jobs (50 a page)", lambda: api.get("/api/v1/jobs")),
            ("GET /api/v1/jobs, last page", lambda: api.get("/api/v1/jobs", {"page": str(-(-args.jobs // 50))})),
        ):
            cpu: list[float] = []
            times = timed(call, args.requests, cpu)
            print(
                f"  {name}: p50 {statistics.median(times):.1f} ms, p95 {percentile(times, 0.95):.1f} ms"
                f" (CPU p50 {statistics.median(cpu):.1f}, p95 {percentile(cpu, 0.95):.1f})"
            )
        from jobs.web import listing

        sorted_by = []
        for sort in listing.SORTS:  # every column the page sorts by, each direction (fewer requests: 13 lists)
            times = timed(functools.partial(page.get, "/jobs/", {"sort": sort}), max(args.requests // 4, 10))
            sorted_by.append(f"{sort} {percentile(times, 0.95):.1f}")
        print(f"  job list page sorted by each column, p95 ms: {', '.join(sorted_by)}")
        print("SQL queries per request, by page size:")
        counts = []
        for size in (10, 100, 500):
            views.PAGE_SIZE = size
            counts.append(
                (
                    size,
                    queries(lambda: page.get("/jobs/")),
                    queries(functools.partial(api.get, "/api/v1/jobs", {"page_size": str(size)})),
                )
            )
        for size, page_count, api_count in counts:
            print(f"  page size {size}: job list page {page_count}, API {api_count}")
        constant = len({c[1] for c in counts}) == 1 and len({c[2] for c in counts}) == 1
        print(f"  constant whatever the page size: {'yes' if constant else 'NO (an N+1)'}")


if __name__ == "__main__":
    main()
