"""Benchmark: one reconcile cycle of a kubernetes datacenter with 500 active jobs on the test cluster.

Starts a private test control plane (tools/k8s; fake nodes big enough for every pod), a private
SQLite database, and 500 PS-mode jobs (1 pserver + 1 trainer each, trainers told to run forever:
1000 pods, 500 StatefulSets, 500 Jobs, 500 Services). Once every job is `running`, it times
reconcile cycles (the beat's `reconcile_datacenter`) and counts the API calls each makes.
Prints calls per cycle (goal <= 3 per datacenter) and cycle time (goal <= 1 s). Prints figures;
it is not a test.

    .venv/bin/python bench/reconcile_scale.py [--jobs 500] [--cycles 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_django(var_dir: Path) -> None:
    os.environ["PADDLECLOUD_VAR_DIR"] = str(var_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.pop("DATABASE_URL", None)  # a private SQLite database, whatever the shell has
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one cycle")
    args = parser.parse_args()

    from tools.k8s.testcluster import FATE, FakeNode, TestCluster, default_bin_dir

    with tempfile.TemporaryDirectory(prefix="bench-reconcile-") as tmp:
        work = Path(tmp)
        nodes = [FakeNode(f"big-{i}", cpu="256", memory="1Ti", pods="1000") for i in range(2)]
        cluster = TestCluster(default_bin_dir(), work / "k8s", nodes=nodes)
        started = time.monotonic()
        cluster.start()
        print(f"test cluster up in {time.monotonic() - started:.1f}s", flush=True)
        try:
            setup_django(work / "var")
            run(cluster, work, args.jobs, args.cycles, FATE, args.profile)
        finally:
            cluster.stop()


def run(cluster: object, work: Path, count: int, cycles: int, fate: str, profile: bool) -> None:
    from django.contrib.auth.models import User
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from datacenters.models import Datacenter, Engine, StorageKind
    from jobs.engines import engine_for
    from jobs.engines.kubernetes import client as kube
    from jobs.models import Job
    from jobs.reconcile import reconcile_datacenter
    from jobs.records import RECORDS
    from tests.k8s.engine_helpers import new_job, start

    root = work / "pfs"
    (root / "home").mkdir(parents=True)
    dc = Datacenter.objects.create(
        name="bench",
        engine=Engine.KUBERNETES,
        kubeconfig=cluster.kubeconfig_path.read_text(),  # type: ignore[attr-defined]
        kube_context=cluster.context,  # type: ignore[attr-defined]
        storage_kind=StorageKind.HOSTPATH,
        host_path=str(root),
        storage_root=str(root),
        default_cpu="10000",
        default_memory="100Ti",
        default_jobs=100000,
    )
    users = [User.objects.create(username=f"user{i}") for i in range(10)]
    spec = {"parallelism": 1, "pservers": 1, "cpu": "100m", "memory": "128Mi", "pscpu": "100m", "psmemory": "128Mi"}
    kube.reset_calls()
    started = time.monotonic()
    for i in range(count):
        job = new_job(dc, users[i % len(users)], {**spec, "jobname": f"job{i}"}, trainer_annotations={fate: "hang"})
        start(job)
        if (i + 1) % 100 == 0:
            print(f"  started {i + 1} jobs ({time.monotonic() - started:.1f}s)", flush=True)
    submit_calls = kube.total_calls()
    print(f"started {count} jobs in {time.monotonic() - started:.1f}s ({submit_calls / count:.1f} API calls per job)")

    ramp = time.monotonic()
    while Job.objects.filter(datacenter=dc, state="running").count() < count:
        reconcile_datacenter(dc)
        if time.monotonic() - ramp > 600:
            raise SystemExit("jobs did not all run within 10 minutes")
        time.sleep(1)
    print(f"all {count} jobs running after {time.monotonic() - ramp:.1f}s more")

    engine = engine_for(dc)
    active = list(Job.objects.filter(datacenter=dc, state="running").select_related("owner", "datacenter"))
    times, poll_times, calls, queries = [], [], [], []
    for _ in range(cycles):
        kube.reset_calls()
        reset_queries()
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            reconcile_datacenter(dc)
            times.append(time.perf_counter() - t0)
        calls.append(kube.total_calls())
        queries.append(len(captured.captured_queries))
        t0 = time.perf_counter()
        engine.poll(active, RECORDS)
        poll_times.append(time.perf_counter() - t0)
    pods = len(kube.for_datacenter(dc).list("Pod", label_selector="app.kubernetes.io/managed-by=paddlecloud"))
    print(f"objects: {count} jobs, {pods} pods")
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(reconcile_datacenter, dc)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    print(f"API calls per reconcile cycle: {statistics.median(calls):.0f} (max {max(calls)}; goal <= 3 per datacenter)")
    print(
        f"reconcile cycle time: median {statistics.median(times):.3f}s, max {max(times):.3f}s (goal <= 1 s); "
        f"of which listing and mapping (engine.poll): median {statistics.median(poll_times):.3f}s; "
        f"database queries per cycle: {statistics.median(queries):.0f}"
    )


if __name__ == "__main__":
    main()
