"""Benchmark: N kubernetes jobs from submit to all `running`, and one reconcile cycle over them, on the test cluster.

For each count given (`--jobs 500 2000 5000`), on a private test control plane of its own (tools/k8s;
fake nodes big enough for every pod) and a private SQLite database: N PS-mode jobs (1 pserver +
1 trainer each, trainers told to run forever: 2N pods, N StatefulSets, N Jobs, N Services) are
started one after the other as submit_job does (engine.start, then pending) while the reconciler
runs every second beside them in a process of its own, as the beat's worker does; the clock stops
when every job is `running`. Then
it times reconcile cycles (the beat's `reconcile_datacenter`) and counts the API calls each makes.

Prints, per count: start time per job (and API calls per start), submit -> all running (total and
per job: linear in N when the per-job figure stays flat), calls, time and DB queries per reconcile
cycle when the reconciler lists (a process without watches), then the same cycles as the control
worker runs them, from the watched mirror: `list calls per cycle: N` (goal 0), the first cycle (it looks at
every job), then `--steady` seconds of cycles at the beat's cadence, longer than a resync period, where a
full cycle looks only at the jobs due (jobs/follow/settled.py): their time, median/p95/max (goal <= 1 s at 5,000
jobs) and how many jobs each looked at; then a table of all counts. Prints figures; it is
not a test. Each count is its own cluster, so the figures of one do not carry the objects of another.

    .venv/bin/python bench/reconcile_scale.py [--jobs 500 2000 5000] [--cycles 10] [--steady 90] [--profile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

USERS = 10  # jobs are spread over this many users, so over this many namespaces
SPEC = {"parallelism": 1, "pservers": 1, "cpu": "100m", "memory": "128Mi", "pscpu": "100m", "psmemory": "128Mi"}


@dataclass
class Figures:
    jobs: int
    baseline: bool = False  # the namespace made at every start, as every start did before
    start_s: float = 0.0  # starting every job (the submit loop)
    start_calls: float = 0.0  # API calls per start
    all_running_s: float = 0.0  # first submit -> every job running
    cycle_s: float = 0.0  # median reconcile cycle once all run
    cycle_calls: int = 0
    cycle_queries: int = 0
    poll_s: float = 0.0
    watch_cold_s: float = 0.0  # the first cycle from the watched mirror: every job looked at
    watch_cycle_s: float = 0.0  # a cycle from the watched mirror (the control worker's way), median
    watch_list_calls: int = 0
    event_cycle_s: float = 0.0  # the cycle a watch event starts, over the one job it named


def setup_django(var_dir: Path, migrate: bool = True) -> None:
    os.environ["PADDLECLOUD_VAR_DIR"] = str(var_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.pop("DATABASE_URL", None)  # a private SQLite database, whatever the shell has
    import django
    from django.core.management import call_command

    django.setup()
    if migrate:
        call_command("migrate", verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[500])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--ramp-timeout", type=float, default=1800.0, help="seconds to wait for all running")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the start loop and one cycle")
    parser.add_argument(
        "--steady", type=float, default=90.0, help="seconds of watched cycles at the beat's cadence (> a resync: 60 s)"
    )
    parser.add_argument(
        "--baseline",
        type=int,
        nargs="*",
        default=[],
        help="counts to run first as the baseline: the user's namespace made at every start (as before)",
    )
    parser.add_argument("--reconcile-loop", nargs=4, help=argparse.SUPPRESS)  # the child: DC COUNT TIMEOUT PROFILE
    args = parser.parse_args()
    if args.reconcile_loop:
        dc_name, count, timeout, profile = args.reconcile_loop
        setup_django(Path(os.environ["PADDLECLOUD_VAR_DIR"]), migrate=False)
        reconcile_loop(dc_name, int(count), float(timeout), profile == "1")
        return

    from tools.k8s.testcluster import FATE, FakeNode, TestCluster, default_bin_dir

    results: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="bench-reconcile-") as tmp:
        runs = [(count, True) for count in args.baseline] + [(count, False) for count in args.jobs]
        for count, baseline in runs:
            work = Path(tmp) / f"{count}{'-baseline' if baseline else ''}"
            pods_per_node = str(count + 100)  # 2 nodes: every pod fits
            nodes = [FakeNode(f"big-{i}", cpu="100000", memory="100Ti", pods=pods_per_node) for i in range(2)]
            cluster = TestCluster(default_bin_dir(), work / "k8s", nodes=nodes)
            started = time.monotonic()
            cluster.start()
            what = " (baseline: the namespace made at every start)" if baseline else ""
            print(f"\n== {count} jobs{what}: test cluster up in {time.monotonic() - started:.1f}s", flush=True)
            try:
                if not results:
                    setup_django(Path(tmp) / "var")
                results.append(run(cluster, work, count, args, FATE, baseline))
            finally:
                cluster.stop()
    summary(results)


def _datacenter(cluster: Any, work: Path, tag: str) -> Any:
    from datacenters.models import Datacenter, Engine, StorageKind

    root = work / "pfs"
    (root / "home").mkdir(parents=True)
    return Datacenter.objects.create(
        name=f"bench{tag}",
        engine=Engine.KUBERNETES,
        kubeconfig=cluster.kubeconfig_path.read_text(),
        kube_context=cluster.context,
        storage_kind=StorageKind.HOSTPATH,
        host_path=str(root),
        storage_root=str(root),
        namespace_prefix=f"b{tag}-",
        default_cpu="100000",
        default_memory="1000Ti",
        default_jobs=1000000,
    )


def reconcile_loop(dc_name: str, count: int, timeout: float, profile: bool) -> None:
    """The beat's reconcile, every second, in a process of its own (as a worker runs it), until every job
    runs; prints progress, then `DONE <seconds> <cycles> <median cycle>` (or `TIMEOUT`)."""
    from datacenters.models import Datacenter
    from jobs.follow.reconcile import reconcile_datacenter

    dc = Datacenter.objects.get(name=dc_name)
    began = last_print = time.monotonic()
    cycles: list[float] = []
    while time.monotonic() - began < timeout:
        t0 = time.monotonic()
        if profile and running_now(dc) >= count // 2:
            profile = False  # one cycle half-way through the ramp
            profiler = _profiler(True)
            profiler.runcall(reconcile_datacenter, dc)
            _print_profile(profiler, "a reconcile cycle half-way through the ramp")
        else:
            reconcile_datacenter(dc)
        cycles.append(time.monotonic() - t0)
        running = running_now(dc)
        if running >= count:
            print(f"DONE {time.monotonic() - began:.3f} {len(cycles)} {statistics.median(cycles):.3f}", flush=True)
            return
        if time.monotonic() - last_print > 15:
            last_print = time.monotonic()
            print(f"    {time.monotonic() - began:6.1f}s: {running} running; last cycle {cycles[-1]:.2f}s", flush=True)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    print("TIMEOUT", flush=True)


class Reconciler(threading.Thread):
    """Runs reconcile_loop in a child process (this script again) beside the submit loop and relays its lines."""

    def __init__(self, dc: Any, count: int, timeout: float, profile: bool) -> None:
        super().__init__(daemon=True)
        self.args = [dc.name, str(count), str(timeout), "1" if profile else "0"]
        self.ramp_s: float | None = None  # from the child's first cycle to every job running
        self.cycles, self.median_cycle = 0, 0.0

    def run(self) -> None:
        cmd = [sys.executable, __file__, "--reconcile-loop", *self.args]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as child:
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith("DONE "):
                    _, seconds, cycles, median = line.split()
                    self.ramp_s, self.cycles, self.median_cycle = float(seconds), int(cycles), float(median)
                else:
                    print(line, end="", flush=True)


def running_now(dc: Any) -> int:
    from jobs.models import Job

    return int(Job.objects.filter(datacenter=dc, state="running").count())


def run(cluster: Any, work: Path, count: int, args: argparse.Namespace, fate: str, baseline: bool) -> Figures:
    from django.contrib.auth.models import User

    from jobs.engines.kubernetes import client as kube
    from jobs.engines.kubernetes import objects
    from tests.k8s.engine_helpers import new_job, start

    objects.NAMESPACE_RECHECK_SECONDS = 0 if baseline else 60
    figures = Figures(count, baseline)
    dc = _datacenter(cluster, work, f"{count}{'b' if baseline else ''}")
    users = [User.objects.get_or_create(username=f"user{i}")[0] for i in range(USERS)]
    jobs = [
        new_job(dc, users[i % USERS], {**SPEC, "jobname": f"{dc.name}-{i}"}, trainer_annotations={fate: "hang"})
        for i in range(count)
    ]
    kube.reset_calls()
    reconciler = Reconciler(dc, count, args.ramp_timeout, args.profile)
    started = time.monotonic()
    reconciler.start()
    profiler = _profiler(args.profile)
    for i, job in enumerate(jobs):
        if profiler and i == count // 2:
            profiler.enable()
        start(job)
        if (i + 1) % (count // 5) == 0:
            print(f"  started {i + 1} jobs ({time.monotonic() - started:.1f}s)", flush=True)
    if profiler:
        profiler.disable()
        _print_profile(profiler, "the second half of the start loop")
    figures.start_s = time.monotonic() - started
    figures.start_calls = kube.total_calls() / count  # the reconciler's calls are in it too: a few per cycle
    print(f"  started {count} jobs in {figures.start_s:.1f}s ({1000 * figures.start_s / count:.1f} ms per job)")
    reconciler.join()
    if reconciler.ramp_s is None:
        raise SystemExit(f"jobs did not all run within {args.ramp_timeout:.0f}s")
    figures.all_running_s = time.monotonic() - started
    print(
        f"  submit -> all {count} running: {figures.all_running_s:.1f}s "
        f"({1000 * figures.all_running_s / count:.1f} ms per job; {reconciler.cycles} cycles during it, "
        f"median {reconciler.median_cycle:.2f}s)",
        flush=True,
    )
    cycles(dc, count, args.cycles, figures, args.profile, args.steady)
    return figures


def cycles(dc: Any, count: int, rounds: int, figures: Figures, profile: bool, steady: float) -> None:
    """Time reconcile cycles over the running jobs: API calls, wall time, listing + mapping, DB queries."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from jobs.engines import engine_for
    from jobs.engines.kubernetes import client as kube
    from jobs.follow.reconcile import reconcile_datacenter
    from jobs.follow.records import RECORDS
    from jobs.models import Job

    engine = engine_for(dc)
    active = list(Job.objects.filter(datacenter=dc, state="running").select_related("owner", "datacenter"))
    times, poll_times, calls, queries = [], [], [], []
    for _ in range(rounds):
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
    if profile:
        profiler = _profiler(True)
        assert profiler is not None
        profiler.runcall(reconcile_datacenter, dc)
        _print_profile(profiler, "one reconcile cycle")
    figures.cycle_s, figures.poll_s = statistics.median(times), statistics.median(poll_times)
    figures.cycle_calls, figures.cycle_queries = int(statistics.median(calls)), int(statistics.median(queries))
    print(f"  objects: {count} jobs, {pods} pods")
    print(f"  listing (no watch): API calls per reconcile cycle: {figures.cycle_calls} (max {max(calls)})")
    print(
        f"  listing (no watch): reconcile cycle time: median {figures.cycle_s:.3f}s, max {max(times):.3f}s; "
        f"of which listing and mapping (engine.poll): median {figures.poll_s:.3f}s; "
        f"database queries per cycle: {figures.cycle_queries}",
        flush=True,
    )
    watched_cycles(dc, count, rounds, figures, steady, profile)


def watched_cycles(dc: Any, count: int, rounds: int, figures: Figures, steady: float, profile: bool = False) -> None:
    """The same cycles as the control worker runs them: from the datacenter's watched mirror, the first (every
    job looked at) and then `steady` seconds of them at the beat's cadence (only the jobs due: jobs/follow/settled.py).
    Then the cycle a watch event starts, over only the job it named (jobs/follow/tasks.py reconcile_promptly)."""
    from django.conf import settings

    from bench.pages import percentile
    from jobs.engines import engine_for
    from jobs.engines.kubernetes import client as kube
    from jobs.engines.kubernetes import names, watch
    from jobs.follow import settled
    from jobs.follow.reconcile import reconcile_datacenter
    from jobs.models import Job

    watch.enable()
    try:
        engine = engine_for(dc)
        selector = names.datacenter_selector(dc.name)
        began = time.monotonic()
        while watch.mirror_for(dc.pk, engine.k8s, selector) is None:  # type: ignore[attr-defined]  # a KubernetesEngine
            if time.monotonic() - began > 300:
                raise SystemExit("the mirror was not ready within 300 s")
            time.sleep(0.05)
        print(f"  watch: mirror listed and watching in {time.monotonic() - began:.2f}s", flush=True)
        watch.WATCH_CALLS.clear()
        settled.forget()
        t0 = time.perf_counter()
        reconcile_datacenter(dc)  # nothing settled yet: it looks at every job, as after a restart
        figures.watch_cold_s = time.perf_counter() - t0
        print(f"  watch: the first cycle (it looks at every job, as after a restart): {figures.watch_cold_s:.3f}s")
        # Then at the beat's cadence for longer than a resync period, so every settled job's resync is in it.
        times, calls, looked = [], [], []
        ends = time.monotonic() + steady
        while time.monotonic() < ends:
            kube.reset_calls()
            settled.CHOICES.clear()
            t0 = time.perf_counter()
            reconcile_datacenter(dc)
            times.append(time.perf_counter() - t0)
            calls.append(sum(n for key, n in kube.CALLS.items() if key.startswith("LIST ")))
            looked.append(settled.CHOICES["looked at"])
            time.sleep(max(0.0, settings.PADDLECLOUD_RECONCILE_SECONDS - times[-1]))
        figures.watch_cycle_s, figures.watch_list_calls = statistics.median(times), max(calls)
        print(f"  list calls per cycle: {figures.watch_list_calls}")
        print(
            f"  watch: reconcile cycle time over {steady:.0f} s ({len(times)} cycles, every "
            f"{settings.PADDLECLOUD_RECONCILE_SECONDS} s): median {figures.watch_cycle_s:.3f}s, "
            f"p95 {percentile(times, 0.95):.3f}s, max {max(times):.3f}s (goal <= 1 s); jobs looked at per cycle: "
            f"median {statistics.median(looked):.0f}, max {max(looked)} of {count}; "
            f"the mirror's own requests meanwhile: {dict(watch.WATCH_CALLS) or 'none'}",
            flush=True,
        )
        if profile:
            profiler = _profiler(True)
            profiler.runcall(reconcile_datacenter, dc)
            _print_profile(profiler, "one watched reconcile cycle")
        ids = list(Job.objects.filter(datacenter=dc, state="running").values_list("pk", flat=True)[:rounds])
        one = []
        for job_id in ids:
            t0 = time.perf_counter()
            reconcile_datacenter(dc, [job_id])
            one.append(time.perf_counter() - t0)
        figures.event_cycle_s = statistics.median(one) if one else 0.0
        print(
            f"  watch: a cycle over the one job an event named: median {figures.event_cycle_s * 1000:.1f} ms, "
            f"max {max(one or [0]) * 1000:.1f} ms",
            flush=True,
        )
    finally:
        watch.disable()


def _profiler(enabled: bool) -> Any:
    if not enabled:
        return None
    import cProfile

    return cProfile.Profile()


def _print_profile(profiler: Any, what: str) -> None:
    import pstats

    print(f"  --- profile of {what} ---")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def summary(results: list[Figures]) -> None:
    print(
        "\n    jobs     | start ms/job | calls/start | submit -> all running | ms/job | listing: cycle (s) | calls "
        "| queries | watching: cycle (s) | list calls"
    )
    for f in results:
        label = f"{f.jobs} (base)" if f.baseline else str(f.jobs)
        print(
            f"{label:>12} | {1000 * f.start_s / f.jobs:>12.1f} | {f.start_calls:>11.1f} | {f.all_running_s:>19.1f} s | "
            f"{1000 * f.all_running_s / f.jobs:>6.1f} | {f.cycle_s:>18.3f} | {f.cycle_calls:>5} | {f.cycle_queries:>7} "
            f"| {f.watch_cycle_s:>19.3f} | {f.watch_list_calls:>10}"
        )


if __name__ == "__main__":
    main()
