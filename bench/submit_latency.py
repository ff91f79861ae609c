"""Benchmark: time from `POST /api/v1/jobs` to the job showing `running` in the API, kubernetes engine.

Starts a private test control plane (tools/k8s), a private var directory (SQLite, filesystem broker)
and a real Celery worker with beat (reconcile every PADDLECLOUD_RECONCILE_SECONDS, default 2 s), as
`make run` does. Submits N PS-mode jobs (1 pserver + 1 trainer, told to run forever) through the API
at a steady rate, and polls the job list API every 50 ms; a job's latency is from just before its
POST to the first poll that shows it `running`. Prints p50/p95 (goal p95 <= 3 s). Prints figures;
it is not a test.

    .venv/bin/python bench/submit_latency.py [--jobs 100] [--interval 0.3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.k8s.testcluster import TestCluster

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_django(var_dir: Path, broker_url: str) -> None:
    os.environ["PADDLECLOUD_VAR_DIR"] = str(var_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["ALLOWED_HOSTS"] = "testserver"  # the in-process API client's host name
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "PADDLECLOUD_CACHE_URL"):
        os.environ.pop(name, None)  # a private SQLite database and broker, whatever the shell has
    if broker_url:
        os.environ["CELERY_BROKER_URL"] = broker_url
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.3, help="seconds between submissions")
    parser.add_argument(
        "--broker",
        choices=["redis", "filesystem"],
        default="redis" if shutil.which("redis-server") else "filesystem",
        help="redis (production; a private redis-server) or kombu's filesystem transport (embedded default, "
        "which polls its folder once a second)",
    )
    args = parser.parse_args()

    from tools.k8s.testcluster import TestCluster, default_bin_dir, free_ports

    with tempfile.TemporaryDirectory(prefix="bench-submit-") as tmp:
        work = Path(tmp)
        cluster = TestCluster(default_bin_dir(), work / "k8s")
        cluster.start()
        redis = None
        try:
            broker_url = ""
            if args.broker == "redis":
                [port] = free_ports(1)
                redis = subprocess.Popen(
                    ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                    stdout=subprocess.DEVNULL,
                )
                broker_url = f"redis://127.0.0.1:{port}/0"
                wait_port(port)
            print(f"broker: {args.broker}", flush=True)
            setup_django(work / "var", broker_url)
            run(cluster, work, args.jobs, args.interval)
        finally:
            if redis is not None:
                redis.terminate()
                redis.wait()
            cluster.stop()


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run(cluster: TestCluster, work: Path, count: int, interval: float) -> None:
    from django.conf import settings
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from datacenters.models import Datacenter, Engine, StorageKind
    from jobs.models import Job
    from tests.workers import start_worker
    from tools.k8s.testcluster import FATE

    root = work / "pfs"
    (root / "home").mkdir(parents=True)
    dc = Datacenter.objects.create(
        name="bench",
        engine=Engine.KUBERNETES,
        kubeconfig=cluster.kubeconfig_path.read_text(),
        kube_context=cluster.context,
        storage_kind=StorageKind.HOSTPATH,
        host_path=str(root),
        storage_root=str(root),
        default_cpu="10000",
        default_memory="100Ti",
        default_jobs=100000,
    )
    user = User.objects.create(username="bench")
    api = APIClient()
    api.force_authenticate(user)
    spec = {
        "datacenter": dc.name,
        "entry": "python train.py",
        "parallelism": 1,
        "pservers": 1,
        "cpu": "100m",
        "memory": "128Mi",
        "pscpu": "100m",
        "psmemory": "128Mi",
    }
    for name in ["warmup", *(f"job{i}" for i in range(count))]:
        (root / "home" / "bench" / "jobs" / name).mkdir(parents=True)

    worker = start_worker(work, beat=True, concurrency=2)  # every lane, on Celery's default queue names
    print(
        f"worker started (reconcile every {settings.PADDLECLOUD_RECONCILE_SECONDS}s); "
        f"submitting {count} jobs, one every {interval}s",
        flush=True,
    )
    try:
        # Warm-up: the first job also makes the user's namespace, quota and ServiceAccount.
        submit(api, {**spec, "jobname": "warmup"}, FATE)
        wait_running(api, {"warmup"}, time.monotonic() + 120)
        submitted: dict[str, float] = {}
        latencies: dict[str, float] = {}
        next_submit = time.monotonic()
        deadline = None
        while len(latencies) < count:
            now = time.monotonic()
            if len(submitted) < count and now >= next_submit:
                name = f"job{len(submitted)}"
                submitted[name] = time.monotonic()
                submit(api, {**spec, "jobname": name}, FATE)
                next_submit += interval
                if len(submitted) == count:
                    deadline = time.monotonic() + 120
            for name in running_now(api) & (set(submitted) - set(latencies)):
                latencies[name] = time.monotonic() - submitted[name]
            if deadline and time.monotonic() > deadline:
                stuck = Job.objects.exclude(name__in=list(latencies)).exclude(name="warmup")
                raise SystemExit(f"not running after 120 s: {[(j.name, j.state, j.message) for j in stuck[:5]]}")
            time.sleep(0.05)
    finally:
        worker.stop()
        if os.environ.get("BENCH_WORKER_LOG"):
            print(worker.log()[-20000:])
    values = list(latencies.values())
    rows = Job.objects.exclude(name="warmup").values_list("created_at", "submitted_at", "started_at")
    queued = [(s - c).total_seconds() for c, s, _ in rows if s]
    started = [(r - s).total_seconds() for _, s, r in rows if s and r]
    print(
        f"of which: queued -> submitted (submit_job ran) p50 {statistics.median(queued):.2f}s "
        f"p95 {percentile(queued, 0.95):.2f}s; submitted -> running recorded by a reconcile p50 "
        f"{statistics.median(started):.2f}s p95 {percentile(started, 0.95):.2f}s"
    )
    print(f"jobs: {count}; submit -> running visible in the API:")
    print(
        f"p50 {statistics.median(values):.2f}s  p95 {percentile(values, 0.95):.2f}s  "
        f"max {max(values):.2f}s  min {min(values):.2f}s  (goal p95 <= 3 s)"
    )


def submit(api: object, spec: dict[str, object], fate: str) -> None:
    from django.db import transaction

    from jobs.models import Job

    # The engine's test hook (trainers that never end) is set in the POST's transaction, so the
    # worker's submit_job (enqueued on commit) already sees it.
    with transaction.atomic():
        response = api.post("/api/v1/jobs", spec, format="json")  # type: ignore[attr-defined]
        if response.status_code != 201:
            raise SystemExit(f"submit refused: {response.status_code} {response.content[:500]!r}")
        Job.objects.filter(uid=response.json()["uid"]).update(engine_data={"pod_annotations": {fate: "hang"}})


def running_now(api: object) -> set[str]:
    response = api.get("/api/v1/jobs?state=running&page_size=500")  # type: ignore[attr-defined]
    return {job["name"] for job in response.json()["results"]}


def wait_running(api: object, names: set[str], deadline: float) -> None:
    while not names <= running_now(api):
        if time.monotonic() > deadline:
            raise SystemExit(f"{names} not running in time")
        time.sleep(0.1)


if __name__ == "__main__":
    main()
