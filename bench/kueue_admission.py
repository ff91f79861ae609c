"""Benchmark: N small jobs from 10 users through a Kueue datacenter, submit -> admitted by Kueue, on the test cluster.

On a private test control plane running Kueue and JobSet (tools/k8s, `kueue=True`) with 50 kwok nodes and a
private SQLite database: N one-trainer jobs (100m, 128Mi, told to run forever) are submitted through the
portal's path, one after the other as submit_job does (engine.start: the user's namespace, ClusterQueue and
LocalQueue on first use, then one suspended JobSet), spread over 10 users whose quotas hold all their jobs.
Meanwhile a thread watches the Workloads and notes when each is first seen admitted.

Measured is the portal path, not bare JobSets: what a user waits for is submit -> admitted through it, and
the start loop's own time is printed beside it (so Kueue's part shows: admitted minus started).

Prints: the start loop's time; submit -> admitted p50/p95/max per job (as first seen; also from the
Workload's QuotaReserved and Admitted condition times, which the API server keeps to the second); the time
from the first submit to every job admitted; and Kueue's published baseline (its performance test: 15,000
workloads admitted in 351 s on its reference setup) scaled to N (351/15000*N s). Figures, not a test.

    .venv/bin/python bench/kueue_admission.py [--jobs 1000] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pages import percentile  # noqa: E402
from bench.reconcile_scale import setup_django  # noqa: E402

USERS = 10
NODES = 50
SPEC = {"parallelism": 1, "cpu": "100m", "memory": "128Mi"}
KUEUE_BASELINE = (15000, 351.0)  # workloads, seconds: Kueue's published performance baseline
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")


class AdmissionWatch(threading.Thread):
    """Watches every Workload; keeps, by JobSet name, when each was first seen admitted and its condition times
    (QuotaReserved, Admitted). A watch, not lists: listing 1,000 Workloads every 0.2 s took the start loop's CPU."""

    def __init__(self, api: Any, count: int, timeout: float) -> None:
        super().__init__(daemon=True)
        self.api, self.count, self.timeout = api, count, timeout
        self.seen: dict[str, float] = {}  # jobset -> time.time() first seen admitted
        self.conditions: dict[str, tuple[datetime | None, datetime | None]] = {}

    def run(self) -> None:
        from kubernetes import client as k8s
        from kubernetes import watch

        custom = k8s.CustomObjectsApi(self.api)
        deadline = time.monotonic() + self.timeout
        while len(self.seen) < self.count and time.monotonic() < deadline:
            stream = watch.Watch().stream(custom.list_cluster_custom_object, *WORKLOADS, timeout_seconds=60)
            for event in stream:
                self._note(event["object"])
                if len(self.seen) >= self.count or time.monotonic() > deadline:
                    break

    def _note(self, workload: dict[str, Any]) -> None:
        owner = ((workload["metadata"].get("ownerReferences") or [{}])[0]).get("name", "")
        times = _condition_times(workload)
        if owner and times[1] is not None and owner not in self.seen:
            self.seen[owner], self.conditions[owner] = time.time(), times


def _condition_times(workload: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    from paddlecloud.contract.units import parse_time

    found = {c["type"]: c for c in (workload.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    return tuple(  # type: ignore[return-value]  # two items
        parse_time(found[kind].get("lastTransitionTime")) if kind in found else None
        for kind in ("QuotaReserved", "Admitted")
    )


def _datacenter(cluster: Any, work: Path) -> Any:
    from datacenters.models import Datacenter, Engine, StorageKind

    root = work / "pfs"
    (root / "home").mkdir(parents=True)
    (root / "public").mkdir()
    return Datacenter.objects.create(
        name="benchkq", engine=Engine.KUBERNETES, admission="kueue", kubeconfig=cluster.kubeconfig_path.read_text(),
        kube_context=cluster.context, storage_kind=StorageKind.HOSTPATH, host_path=str(root), storage_root=str(root),
        namespace_prefix="bk-", default_cpu="1000", default_memory="10Ti", default_jobs=1000000,
    )  # fmt: skip


def run(cluster: Any, work: Path, count: int, timeout: float) -> None:
    from django.contrib.auth.models import User

    from tests.k8s.engine_helpers import new_job, start
    from tools.k8s.testcluster import FATE

    dc = _datacenter(cluster, work)
    users = [User.objects.get_or_create(username=f"user{i}")[0] for i in range(USERS)]
    jobs = [
        new_job(dc, users[i % USERS], {**SPEC, "jobname": f"j{i}"}, trainer_annotations={FATE: "hang"})
        for i in range(count)
    ]
    with cluster.api_client() as api:
        watcher = AdmissionWatch(api, count, timeout)
        submitted: dict[str, float] = {}
        first = time.time()
        watcher.start()
        for i, job in enumerate(jobs):
            submitted[job.uid] = time.time()
            start(job)
            if (i + 1) % max(1, count // 5) == 0:
                print(f"  submitted {i + 1} jobs ({time.time() - first:.1f}s)", flush=True)
        loop_s = time.time() - first
        watcher.join(timeout)
    report(count, loop_s, first, submitted, watcher)


def report(count: int, loop_s: float, first: float, submitted: dict[str, float], watcher: AdmissionWatch) -> None:
    admitted = {uid: watcher.seen[uid] for uid in submitted if uid in watcher.seen}
    if len(admitted) < count:
        print(f"  only {len(admitted)} of {count} admitted before the timeout")
    if not admitted:
        return
    waits = [admitted[uid] - submitted[uid] for uid in admitted]
    reserved = [
        (when.timestamp() - submitted[uid])
        for uid, (when, _) in watcher.conditions.items()
        if when is not None and uid in submitted
    ]
    total = max(admitted.values()) - first
    scaled = KUEUE_BASELINE[1] / KUEUE_BASELINE[0] * count
    print(f"\n  {count} jobs, {USERS} users, {NODES} kwok nodes, portal path (engine.start per job)")
    print(f"  start loop: {loop_s:.1f}s ({1000 * loop_s / count:.1f} ms per job)")
    print(
        f"  submit -> admitted (first seen, watched): p50 {statistics.median(waits):.2f}s, "
        f"p95 {percentile(waits, 0.95):.2f}s, max {max(waits):.2f}s"
    )
    if reserved:
        print(
            f"  submit -> QuotaReserved (condition time, 1 s resolution): p50 {statistics.median(reserved):.2f}s, "
            f"p95 {percentile(reserved, 0.95):.2f}s"
        )
    print(f"  first submit -> all {len(admitted)} admitted: {total:.1f}s")
    print(
        f"  Kueue's baseline scaled to {count}: {scaled:.1f}s "
        f"({KUEUE_BASELINE[0]} workloads in {KUEUE_BASELINE[1]:.0f}s on its reference setup)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for every job admitted")
    args = parser.parse_args()
    if args.jobs < 1:
        raise SystemExit("--jobs: at least 1")

    from tools.k8s.testcluster import FakeNode, TestCluster, default_bin_dir

    with tempfile.TemporaryDirectory(prefix="bench-kueue-") as tmp:
        work = Path(tmp)
        nodes = [FakeNode(f"kq-{i}", cpu="64", memory="256Gi", pods="250") for i in range(NODES)]
        cluster = TestCluster(default_bin_dir(), work / "k8s", nodes=nodes, kueue=True)
        began = time.monotonic()
        cluster.start()
        print(f"== test cluster with Kueue up in {time.monotonic() - began:.1f}s ({datetime.now(UTC):%H:%M:%S})")
        try:
            setup_django(work / "var")
            run(cluster, work, args.jobs, args.timeout)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
