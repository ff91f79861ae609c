"""Benchmark: from `POST /api/v1/jobs` to the job's state in the API, by engine and broker, under a burst.

For each broker asked (`--broker embedded,redis`: the embedded default, core/broker.py, and a private
redis-server as the baseline in the same run), a fresh process starts a private var directory (SQLite),
a real Celery worker with beat (reconcile every PADDLECLOUD_RECONCILE_SECONDS, default 2 s) as
`make run` does, and on `--engine kubernetes` a private test control plane (tools/k8s). It then
1. submits a trivial job (one trainer, one step) `--trivial` times, one after another, and times
   submit -> `succeeded` visible in the API (Ray Jobs' figure for the same: 0.95 s, issue 21);
2. submits `--jobs` jobs at `--rate` per second through the API, polling the job list every 50 ms,
   and prints p50/p95 of submit -> `running` visible and (local engine) submit -> final visible.
A local job trains for --run-seconds (a stand-in package, tests/jobs/fake_package: no Paddle);
a kubernetes job (1 pserver + 1 trainer) runs forever. Prints figures; it is not a test.

    .venv/bin/python bench/submit_latency.py [--engine local|kubernetes] [--broker embedded,redis]
        [--jobs 100] [--rate 3] [--trivial 5] [--watch on,off]

On kubernetes, `--watch on,off` runs the control worker watching the cluster (the default) and, as the
baseline in the same run, listing it every cycle (PADDLECLOUD_K8S_WATCH=false).
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FAKE_PACKAGE = ROOT / "tests" / "jobs" / "fake_package"
FINAL = {"succeeded", "failed", "killed"}
POLL_SECONDS = 0.05


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["local", "kubernetes"], default="local")
    parser.add_argument("--broker", default="embedded,redis", help="comma-separated: embedded, redis")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--rate", type=float, default=3.0, help="submissions per second in the burst")
    parser.add_argument("--trivial", type=int, default=5, help="trivial jobs timed one by one before the burst")
    parser.add_argument("--run-seconds", type=float, default=2.0, help="how long a local burst job trains")
    parser.add_argument(
        "--watch", default="on", help="kubernetes: comma-separated on, off: the control worker watches, or lists"
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one broker
    return parser.parse_args()


def main() -> None:
    args = parse()
    brokers = [b.strip() for b in args.broker.split(",") if b.strip()]
    if not set(brokers) <= {"embedded", "redis"}:
        raise SystemExit(f"--broker: {args.broker!r}: each must be embedded or redis")
    if "redis" in brokers and not shutil.which("redis-server"):
        raise SystemExit("--broker redis needs redis-server on PATH")
    if args.one:
        with private_broker(brokers[0]) as url:
            measure(args, brokers[0], url)
        return
    watches = [w.strip() for w in args.watch.split(",") if w.strip()]
    if not set(watches) <= {"on", "off"}:
        raise SystemExit(f"--watch: {args.watch!r}: each must be on or off")
    # One process per broker (and watch mode): Django and Celery are configured once per process.
    for broker in brokers:
        for watch in watches if args.engine == "kubernetes" else ["on"]:
            argv = ["--engine", args.engine, "--jobs", str(args.jobs), "--rate", str(args.rate),
                    "--trivial", str(args.trivial), "--run-seconds", str(args.run_seconds)]  # fmt: skip
            env = {**os.environ, "PADDLECLOUD_K8S_WATCH": "true" if watch == "on" else "false"}
            subprocess.run([sys.executable, __file__, *argv, "--broker", broker, "--one"], check=True, env=env)


@contextmanager
def private_broker(broker: str) -> Iterator[str]:
    """The broker URL to use: "" for the embedded default, else a private redis-server's."""
    if broker == "embedded":
        yield ""
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        redis.terminate()
        redis.wait()


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


def measure(args: argparse.Namespace, broker: str, broker_url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-submit-") as tmp:
        work = Path(tmp)
        setup_django(work / "var", broker_url)
        if args.engine == "kubernetes":
            from tools.k8s.testcluster import TestCluster, default_bin_dir

            cluster = TestCluster(default_bin_dir(), work / "k8s")
            cluster.start()
            try:
                run(args, broker, work, KubernetesSetup(cluster))
            finally:
                cluster.stop()
        else:
            run(args, broker, work, LocalSetup(args.run_seconds))


class LocalSetup:
    """The local engine: jobs are processes on this host; the package is the fake one (no Paddle)."""

    engine = "local"

    def __init__(self, run_seconds: float) -> None:
        self.steps = max(1, round(run_seconds / 0.1))

    def datacenter(self, root: Path) -> Any:
        from datacenters.models import Datacenter, Engine, StorageKind

        return Datacenter.objects.create(name="bench", engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL,
                                         storage_root=str(root), default_cpu="10000", default_memory="100Ti",
                                         default_jobs=100000, capacity_cpu="10000",
                                         capacity_memory="100Ti", max_queued_jobs=10000)  # fmt: skip

    def spec(self, trivial: bool) -> dict[str, object]:
        if trivial:  # the spec's default CPU, as a Ray job gets: a 100m cap makes Python's own start take ~1 s
            return {"entry": "python train.py", "env": {"FAKE_STEPS": "1", "FAKE_STEP_SECONDS": "0"}}
        return {"entry": "python train.py", "cpu": "100m", "memory": "128Mi",
                "env": {"FAKE_STEPS": str(self.steps), "FAKE_STEP_SECONDS": "0.1"}}  # fmt: skip

    def package(self, folder: Path) -> None:
        shutil.copytree(FAKE_PACKAGE, folder, ignore=shutil.ignore_patterns("__pycache__"))

    def after_post(self, uid: str) -> None:
        pass


class KubernetesSetup:
    """The test control plane: a 1+1 PS job whose pods are told to run forever (tools/k8s FATE)."""

    engine = "kubernetes"

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def datacenter(self, root: Path) -> Any:
        from datacenters.models import Datacenter, Engine, StorageKind

        return Datacenter.objects.create(
            name="bench", engine=Engine.KUBERNETES, kubeconfig=self.cluster.kubeconfig_path.read_text(),
            kube_context=self.cluster.context, storage_kind=StorageKind.HOSTPATH, host_path=str(root),
            storage_root=str(root), default_cpu="10000", default_memory="100Ti", default_jobs=100000,
        )  # fmt: skip

    def spec(self, trivial: bool) -> dict[str, object]:
        return {"entry": "python train.py", "parallelism": 1, "pservers": 1, "cpu": "100m", "memory": "128Mi",
                "pscpu": "100m", "psmemory": "128Mi"}  # fmt: skip

    def package(self, folder: Path) -> None:
        folder.mkdir(parents=True)

    def after_post(self, uid: str) -> None:
        from jobs.models import Job
        from tools.k8s.testcluster import FATE

        # Set in the POST's transaction, so the worker's submit_job (enqueued on commit) already sees it.
        Job.objects.filter(uid=uid).update(engine_data={"pod_annotations": {FATE: "hang"}})


def run(args: argparse.Namespace, broker: str, work: Path, setup: Any) -> None:
    from django.conf import settings
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    root = work / "pfs"
    (root / "home").mkdir(parents=True)
    dc = setup.datacenter(root)
    api = APIClient()
    api.force_authenticate(User.objects.create(username="bench"))
    trivial = [f"trivial{i}" for i in range(args.trivial if setup.engine == "local" else 0)]
    burst = [f"job{i}" for i in range(args.jobs)]
    for name in ["warmup", *trivial, *burst]:
        setup.package(root / "home" / "bench" / "jobs" / name)

    def post(name: str, trivial_job: bool = False) -> None:
        submit(api, setup, {**setup.spec(trivial_job), "datacenter": dc.name, "jobname": name})

    workers = start_lanes(work)
    print(f"engine {setup.engine}, broker {broker}: workers started as make run does (reconcile every "
          f"{settings.PADDLECLOUD_RECONCILE_SECONDS}s)", flush=True)  # fmt: skip
    try:
        # Warm-up: the first job also makes what a user's first job needs (a namespace on kubernetes).
        post("warmup", trivial_job=True)
        wait_states(api, {"warmup"}, {"running", *FINAL}, time.monotonic() + 120)
        succeeded = []
        for name in trivial:
            start = time.monotonic()
            post(name, trivial_job=True)
            wait_states(api, {name}, FINAL, time.monotonic() + 60, poll=0.01)
            succeeded.append(time.monotonic() - start)
        running, final = follow_burst(api, post, burst, args.rate, want_final=setup.engine == "local")
    finally:
        for worker in workers:
            worker.stop()
            if os.environ.get("BENCH_WORKER_LOG"):
                print(worker.log()[-20000:])
    report(broker, setup.engine, args, succeeded, running, final, "".join(w.log() for w in workers))


# The worker processes of `make run` (scripts/common.sh start_worker): one per lane (core/lanes.py).
LANES = (
    ("celery", ["--concurrency", "2"]),
    ("celery-control", ["-B", "--pool", "threads", "--concurrency", "2"]),
    ("celery-side,celery-notify", ["--pool", "threads", "--concurrency", "4"]),
)


def start_lanes(work: Path) -> list[Any]:
    from tests.workers import WorkerProcess

    started = []
    for queues, options in LANES:
        name = queues.split(",")[0]
        log_path = work / f"worker-{name}.log"
        if "-B" in options:
            options = [*options, "-s", str(work / "beat-schedule")]
        argv = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", queues, *options, "-l", "info",
                "-n", f"{name}@%h", "--without-gossip", "--without-mingle"]  # fmt: skip
        with log_path.open("wb") as out:
            process = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(WorkerProcess(queue=name, process=process, log_path=log_path))
    return started


def follow_burst(
    api: Any, post: Any, names: list[str], rate: float, want_final: bool
) -> tuple[list[float], list[float]]:
    """Submit `names` at `rate`/s; seconds from each POST to its first poll showing running (or final)."""
    submitted: dict[str, float] = {}
    running: dict[str, float] = {}
    final: dict[str, float] = {}
    start = time.monotonic()
    deadline = start + len(names) / rate + 300
    while len(final if want_final else running) < len(names):
        now = time.monotonic()
        while len(submitted) < len(names) and now >= start + len(submitted) / rate:
            name = names[len(submitted)]
            submitted[name] = time.monotonic()
            post(name)
            now = time.monotonic()
        for name, state in states(api).items():
            if name in submitted and name not in running and state in {"running", *FINAL}:
                running[name] = time.monotonic() - submitted[name]
            if name in submitted and name not in final and state in FINAL:
                final[name] = time.monotonic() - submitted[name]
        if time.monotonic() > deadline:
            raise SystemExit(f"not all {'final' if want_final else 'running'} in time: {len(running)} running, "
                             f"{len(final)} final of {len(names)}")  # fmt: skip
        time.sleep(POLL_SECONDS)
    return list(running.values()), list(final.values())


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return (f"p50 {statistics.median(values):.2f}s  p95 {percentile(values, 0.95):.2f}s  "
            f"max {max(values):.2f}s")  # fmt: skip


def report(broker: str, engine: str, args: argparse.Namespace, succeeded: list[float], running: list[float],
           final: list[float], log: str) -> None:  # fmt: skip
    from jobs.models import Job

    rows = Job.objects.filter(name__startswith="job").values_list("created_at", "submitted_at")
    queued = [(s - c).total_seconds() for c, s in rows if s]
    discarded = log.count("Discarding revoked task: jobs.follow.reconcile")
    from django.conf import settings

    watching = f", watch {'on' if settings.PADDLECLOUD_K8S_WATCH else 'off'}" if engine == "kubernetes" else ""
    print(f"== engine {engine}, broker {broker}{watching}: {args.jobs} jobs at {args.rate}/s ==")
    if succeeded:
        print(f"trivial job, submit -> succeeded visible ({len(succeeded)} one by one): {spread(succeeded)}  "
              f"(Ray Jobs: 0.95 s)")  # fmt: skip
    print(f"submit -> running visible:  {spread(running)}  (goal p95 <= 1 s)")
    if final:
        print(f"submit -> final visible:    {spread(final)}  (each job trains {args.run_seconds:g} s)")
    print(f"of which queued -> submit_job ran: {spread(queued)}; reconcile runs discarded as expired: {discarded}",
          flush=True)  # fmt: skip


def submit(api: Any, setup: Any, spec: dict[str, object]) -> None:
    from django.db import transaction

    with transaction.atomic():
        response = api.post("/api/v1/jobs", spec, format="json")
        if response.status_code != 201:
            raise SystemExit(f"submit refused: {response.status_code} {response.content[:500]!r}")
        setup.after_post(response.json()["uid"])


def states(api: Any) -> dict[str, str]:
    response = api.get("/api/v1/jobs?page_size=500")
    return {job["name"]: job["state"] for job in response.json()["results"]}


def wait_states(api: Any, names: set[str], wanted: set[str], deadline: float, poll: float = 0.1) -> None:
    while not all(states(api).get(name) in wanted for name in names):
        if time.monotonic() > deadline:
            raise SystemExit(f"{names} not {wanted} in time: {states(api)}")
        time.sleep(poll)


if __name__ == "__main__":
    main()
