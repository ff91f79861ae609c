"""Benchmark: the PS example (2 pservers + 2 trainers) in real pods against the same job on the local engine.

Starts the test control plane with a real node (root; `tools/k8s/build.sh` first), makes a
`kubernetes` datacenter on it (hostPath storage, the runtime image built from deploy/Dockerfile)
and a `local` one, puts examples/fit_a_line into both, and runs the same spec on each, side by side
per round: engine.start(), then the reconciler every 0.2 s (the portal's beat does it every 2 s).
Prints submit -> running and submit -> succeeded for each engine.

    sudo .venv/bin/python bench/pod_job.py [--runs 1] [--passes 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_django(var_dir: Path) -> None:
    os.environ["PADDLECLOUD_VAR_DIR"] = str(var_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.pop("DATABASE_URL", None)  # a private SQLite database, whatever the shell has
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def run_once(dc: Any, user: Any, spec: dict[str, Any]) -> tuple[float, float, str]:
    """(seconds to running, seconds to succeeded, final state) for one job on one datacenter."""
    from django.utils import timezone

    from jobs.engines import engine_for
    from jobs.follow.reconcile import reconcile_datacenter
    from jobs.follow.records import RECORDS
    from jobs.models import TERMINAL_STATES, Job, JobState
    from jobs.spec import JobSpecSerializer
    from jobs.states import transition

    name = f"fit{uuid.uuid4().hex[:4]}"
    package = Path(dc.storage_root) / "home" / user.username / "jobs" / name
    shutil.copytree(ROOT / "examples" / "fit_a_line", package, ignore=shutil.ignore_patterns("data", "__pycache__"))
    # The shards made beforehand (not timed), as a user uploads them: the jobs only read the package.
    subprocess.run([sys.executable, str(package / "prepare_data.py"), str(package / "data")], check=True, cwd=package)
    serializer = JobSpecSerializer(data={**spec, "jobname": name})
    serializer.is_valid(raise_exception=True)
    data = {**serializer.validated_data, "datacenter": dc.name}
    job = Job.objects.create(
        owner=user,
        datacenter=dc,
        name=name,
        uid=f"{name}-{uuid.uuid4().hex[:5]}",
        spec=data,
        state=JobState.SUBMITTING,
    )
    started = time.monotonic()
    engine_for(dc).start(job, RECORDS)
    transition(job.pk, JobState.PENDING, submitted_at=timezone.now())
    to_running = 0.0
    while True:
        reconcile_datacenter(dc)
        job.refresh_from_db()
        if not to_running and job.state in (JobState.RUNNING, *TERMINAL_STATES):
            to_running = time.monotonic() - started
        if job.state in TERMINAL_STATES:
            return to_running, time.monotonic() - started, f"{job.state} {job.reason}".strip()
        if time.monotonic() - started > 900:
            return to_running, float("nan"), f"timeout in {job.state}"
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("a real node needs root")
    work = Path(tempfile.mkdtemp(prefix="pod-bench-"))
    setup_django(work / "var")
    from django.contrib.auth.models import User

    from datacenters.models import Datacenter, Engine, StorageKind
    from tools.k8s.images import read_manifest
    from tools.k8s.testcluster import RealNode, TestCluster, default_bin_dir, node_missing

    missing = node_missing()
    if missing:
        raise SystemExit(f"the real node needs: {', '.join(missing)} (run tools/k8s/build.sh as root)")
    manifest = read_manifest()
    assert manifest is not None
    cluster = TestCluster(default_bin_dir(), work / "k8s", nodes=(), node=RealNode())
    t0 = time.monotonic()
    cluster.start(timeout=300)
    print(f"cluster with a real node up in {time.monotonic() - t0:.1f}s")
    try:
        user = User.objects.create_user("bench")
        dcs = {}
        for engine in ("local", "kubernetes"):
            root = work / "pfs" / engine
            (root / "home").mkdir(parents=True)
            (root / "public").mkdir()
            common: dict[str, Any] = {"storage_root": str(root), "name": engine, "engine": engine}
            if engine == "kubernetes":
                common.update(
                    engine=Engine.KUBERNETES,
                    kubeconfig=cluster.kubeconfig_path.read_text(),
                    kube_context=cluster.context,
                    namespace_prefix="bench-",
                    storage_kind=StorageKind.HOSTPATH,
                    host_path=str(root),
                    cpu_image=manifest["runtime"]["ref"],
                    default_cpu="8",
                    default_memory="16Gi",
                )
            else:
                common.update(engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL)
            dcs[engine] = Datacenter.objects.create(**common)
        # The node has this machine's cores and the scheduler counts requests: 4 pods of 0.5 core fit on 2.
        small = {"cpu": "0.5", "pscpu": "0.5", "memory": "1Gi", "psmemory": "1Gi"}
        spec = {"entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": args.passes, **small}
        print(f"{'run':>3}  {'engine':<10} {'to running':>11} {'to succeeded':>13}  result")
        for run in range(args.runs):
            for engine, dc in dcs.items():
                running, total, result = run_once(dc, user, spec)
                print(f"{run:>3}  {engine:<10} {running:>10.1f}s {total:>12.1f}s  {result}")
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
