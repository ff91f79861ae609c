"""Benchmark: a 2+2 PS job through our local engine vs `python -m paddle.distributed.launch`.

Both run the measured reference workload of ../shared/paddle-reference/train_ps.py (fit_a_line
style, GEO mode, 1000 steps: the anchor of paddle-notes.md, launcher 10.4 s vs hand-set env 8.2 s)
in the same cached venv (examples/fit_a_line/requirements.txt), alternating, N runs each. Under
Paddle's launcher the script waits for the pservers and trainer 0 stops them itself (its defaults);
under ours the launcher waits and the engine stops them (WAIT_SERVERS=0, STOP_SERVERS=0).
Ours is timed from engine.start() until the job is finished and every process is gone, with the
reconciler polled every 0.2 s (the portal's beat runs it every 2 s, PADDLECLOUD_RECONCILE_SECONDS);
theirs from exec until the launcher exits. Ours runs twice per round, in the bubblewrap sandbox (what
jobs get) and without it (a datacenter's "run without sandbox"). Prints the medians, the ratios
ours/theirs (goal <= 0.5 with the sandbox on, issue 11), the sandbox's own cost per process:
`bwrap <a job's sandbox> true` against `true`, and what a job's own network adds to its start (once
per job, network.start until its namespace is ready): closed, and with slirp4netns egress.

    .venv/bin/python bench/launch_overhead.py [--runs 5] [--steps 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "paddle-reference" / "train_ps.py"
sys.path.insert(0, str(ROOT))


def setup_django(var_dir: Path) -> None:
    os.environ["PADDLECLOUD_VAR_DIR"] = str(var_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.pop("DATABASE_URL", None)  # a private SQLite database, whatever the shell has
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


_REAL_PROBE: dict[str, object] = {}


def use_sandbox(on: bool) -> None:
    """On: jobs run in the sandbox (the host must allow it). Off: as on a datacenter without one."""
    from jobs.engines.local import sandbox

    real = _REAL_PROBE.setdefault("probe", sandbox.probe())
    assert isinstance(real, sandbox.Probe)
    if on and not real.ok:
        raise SystemExit(f"no sandbox on this host: {real.error}")
    off = sandbox.Probe(None, "sandbox off for this benchmark run", 0.0)
    sandbox.probe = (lambda: real) if on else (lambda: off)  # type: ignore[assignment]


def sandbox_cost(repeat: int = 20) -> tuple[float, float]:
    """Median seconds of `true` in a job's sandbox and of plain `true`."""
    from datacenters.models import Datacenter
    from jobs.engines.local import sandbox
    from jobs.engines.local import world as local_world
    from jobs.engines.local.runtimes import RuntimePaths
    from storage import paths

    probe = sandbox.probe()
    dc = Datacenter.objects.get(name="local")
    where = paths.places(dc, "bench")
    runtime = RuntimePaths(sys.executable, [sys.prefix, sys.base_prefix], None)
    box = local_world.build(dc, where, where.home_inside, probe, runtime, [], (65534, 65534), (), False)
    argv = [a if a != sandbox.INFO_FD else "1" for a in sandbox.command(box, ["true"])]
    timings: dict[str, list[float]] = {"sandbox": [], "plain": []}
    for _ in range(repeat):
        for kind, command in (("sandbox", argv), ("plain", ["true"])):
            t0 = time.monotonic()
            subprocess.run(command, capture_output=True, check=True)
            timings[kind].append(time.monotonic() - t0)
    return statistics.median(timings["sandbox"]), statistics.median(timings["plain"])


def network_cost(egress: bool, repeat: int = 10) -> float:
    """Median seconds from starting a job's network (network.py) until processes can join it."""
    import signal

    from jobs.engines.local import network, processes

    timings = []
    with tempfile.TemporaryDirectory(prefix="bench-net-") as tmp:
        for run in range(repeat):
            t0 = time.monotonic()
            held = network.start(Path(tmp) / str(run), 1_000_000_000, 1_000_000_000, egress)
            timings.append(time.monotonic() - t0)
            processes.signal_groups([held.spawned.pid], signal.SIGKILL)
    return statistics.median(timings)


def run_ours(package: Path, steps: int, run: str) -> float:
    from django.contrib.auth.models import User

    from datacenters.models import Datacenter, Engine, StorageKind
    from jobs.engines import engine_for
    from jobs.follow.reconcile import reconcile_datacenter
    from jobs.follow.records import RECORDS
    from jobs.models import TERMINAL_STATES, Job
    from jobs.spec import JobSpecSerializer

    user, _ = User.objects.get_or_create(username="bench")
    root = Path(os.environ["PADDLECLOUD_VAR_DIR"]) / "pfs"
    dc, _ = Datacenter.objects.get_or_create(name="local", defaults={
        "engine": Engine.LOCAL, "storage_kind": StorageKind.LOCAL, "storage_root": str(root),
        "run_without_sandbox": True})
    name = f"fit{run}"
    shutil.copytree(package, root / "home" / "bench" / "jobs" / name, dirs_exist_ok=True)
    spec = JobSpecSerializer(data={"jobname": name, "entry": "python train_ps.py", "parallelism": 2, "pservers": 2,
                                   "env": {"STEPS": str(steps), "WAIT_SERVERS": "0", "STOP_SERVERS": "0"}})
    spec.is_valid(raise_exception=True)
    job = Job.objects.create(owner=user, datacenter=dc, name=name, uid=f"{name}-bench",
                             spec={**spec.validated_data, "datacenter": "local"}, state="pending")
    started = time.monotonic()
    engine_for(dc).start(job, RECORDS)
    while True:
        reconcile_datacenter(dc)
        job.refresh_from_db()
        if job.state in TERMINAL_STATES and job.released:
            break
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    if job.state != "succeeded":
        raise SystemExit(f"our run {run} ended {job.state}: {job.message}")
    return elapsed


def run_theirs(package: Path, steps: int, python: Path, work: Path, run: int) -> float:
    cwd = work / f"theirs{run}"
    shutil.copytree(package, cwd, dirs_exist_ok=True)
    env = {**os.environ, "PADDLE_WITH_GLOO": "1", "STEPS": str(steps), "FLAGS_enable_pir_api": "0",
           "PATH": f"{python.parent}:{os.environ['PATH']}"}
    started = time.monotonic()
    result = subprocess.run(
        [str(python), "-m", "paddle.distributed.launch", "--server_num=2", "--trainer_num=2",
         "--log_dir", str(cwd / "log"), "train_ps.py"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"paddle.distributed.launch run {run} exited {result.returncode}:\n{result.stdout[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()

    from paddlecloud.contract import venvcache

    # The local engine's default runtime (the same base venv jobs run in).
    requirements = "paddlepaddle==3.0.0\nprotobuf<7\n"
    runtimes = venvcache.default_cache_dir() / "runtimes"
    venv = venvcache.ensure_base("default", requirements, ROOT / "client", runtimes, log=lambda line: None)
    with tempfile.TemporaryDirectory(prefix="bench-launch-") as tmp:
        work = Path(tmp)
        package = work / "package"
        package.mkdir()
        shutil.copy(REFERENCE, package / "train_ps.py")
        shutil.copy(ROOT / "examples" / "fit_a_line" / "requirements.txt", package)
        setup_django(work / "var")
        # Warm both once (data preparation, page cache) before anything is timed.
        run_theirs(package, args.steps, venv / "bin" / "python", work, -1)
        boxed, bare, theirs = [], [], []
        for run in range(args.runs):
            use_sandbox(True)
            boxed.append(run_ours(package, args.steps, f"{run}s"))
            use_sandbox(False)
            bare.append(run_ours(package, args.steps, f"{run}n"))
            theirs.append(run_theirs(package, args.steps, venv / "bin" / "python", work, run))
            print(
                f"run {run}: ours in sandbox {boxed[-1]:.2f}s  ours without {bare[-1]:.2f}s  "
                f"paddle.distributed.launch {theirs[-1]:.2f}s",
                flush=True,
            )
        use_sandbox(True)
        in_box, plain = sandbox_cost()
        closed, egress = network_cost(False), network_cost(True)
    theirs_median = statistics.median(theirs)
    for label, times in (("ours in sandbox", boxed), ("ours without sandbox", bare)):
        median = statistics.median(times)
        print(f"median {label}: {median:.2f}s (ours/theirs {median / theirs_median:.2f})")
    print(f"median paddle.distributed.launch: {theirs_median:.2f}s (goal: ours in the sandbox <= 0.5x)")
    print(
        f"sandbox cost per process: {(in_box - plain) * 1000:.1f} ms "
        f"(bwrap ... true {in_box * 1000:.1f} ms, true {plain * 1000:.1f} ms)"
    )
    print(f"job network per job start: closed {closed * 1000:.0f} ms, with egress {egress * 1000:.0f} ms")


if __name__ == "__main__":
    main()
