"""Benchmark: what a job's own start costs, step by step, and the makespan of many short jobs against plain Python.

    .venv/bin/python bench/job_start.py [--jobs 20] [--seconds 5]

1. Plain: `--jobs` runs of a one-core CPU-bound script of about `--seconds` each, two at a time (the host's 2
   cores), as plain `python` processes: the makespan every platform is measured against.
2. Portal: the same script as `--jobs` one-core jobs submitted at once to a private portal on the embedded
   defaults (SQLite, the pcfs:// broker, real Celery workers, the local engine in its sandbox and job network);
   its makespan / the plain makespan (goal <= 1.05, issue 36).
3. Each job's start and end, from its rows, the entry's own clock in its log and its process's exit status file,
   as medians: queued -> admitted (the scheduler; mostly the wait for a room), admitted -> its process running
   (the submit task, the job's network, its runtime, the sandbox's supervisor: bench/launch_overhead.py times
   the network alone), running -> the entry's first line (launcher, interpreter), the entry's run, its exit ->
   seen finished (supervisor, listener), and from a job's end to the next one's admission (release, cycle)
   where one waited for its room.
Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

# One core busy for a fixed amount of work; the first line says when the entry began, the last when it ended.
TRAINER = (
    "import time\nprint('began', time.time(), flush=True)\nx = 0\nfor i in range({loops}):\n    x += i * i\n"
    "print('ended', time.time(), flush=True)\n"
)


def calibrate(seconds: float) -> int:
    """Loops of TRAINER's body that take about `seconds` on one core of this host."""
    loops = 2_000_000
    script = TRAINER.format(loops=loops)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    return int(loops * seconds / (time.perf_counter() - began))


def plain_makespan(script: str, count: int) -> float:
    began = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: subprocess.run([sys.executable, "-c", script], check=True, capture_output=True),
                      range(count)))  # fmt: skip
    return time.perf_counter() - began


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms" if values else "n/a"


def steps(names: list[str]) -> dict[str, list[float]]:
    """Each step of each job's start and end, in seconds (see the module's docstring)."""
    from jobs.engines.local.supervisor import Supervisor
    from jobs.files.logfiles import open_log_fd
    from jobs.models import Job

    out: dict[str, list[float]] = {k: [] for k in ("admit", "start", "entry", "run", "seen", "next")}
    jobs = list(Job.objects.filter(name__in=names).select_related("datacenter", "owner"))
    ends: list[float] = []
    for job in jobs:
        worker = job.workers.get(role="trainer", index=0)
        with os.fdopen(open_log_fd(job, "trainer-0", os.O_RDONLY), "rb") as log:
            text = log.read().decode()
        began = float(next(line.split()[1] for line in text.splitlines() if line.startswith("began ")))
        ended = float(next(line.split()[1] for line in text.splitlines() if line.startswith("ended ")))
        status = Supervisor(job.datacenter).status_path(job, "trainer", 0)
        exited = status.stat().st_mtime
        assert job.admitted_at and worker.started_at and job.finished_at
        out["admit"].append((job.admitted_at - job.created_at).total_seconds())
        out["start"].append((worker.started_at - job.admitted_at).total_seconds())
        out["entry"].append(began - worker.started_at.timestamp())
        out["run"].append(ended - began)
        out["seen"].append(job.finished_at.timestamp() - exited)
        ends.append(exited)
    admissions = sorted(job.admitted_at.timestamp() for job in jobs if job.admitted_at)
    # A job admitted after the first two waited for a room: from the end that freed it to its admission.
    for admitted in admissions[2:]:
        before = [end for end in ends if end <= admitted]
        if before:
            out["next"].append(admitted - max(before))
    return out


def portal_makespan(script: str, count: int, work: Path) -> tuple[float, dict[str, list[float]]]:
    from bench.scheduler import real_portal, setup_django

    env = setup_django(work / "var")
    from jobs.models import Job

    names = [f"p{i}" for i in range(count)]
    with real_portal(work, env, script) as run:
        makespan = run(names)
    bad = Job.objects.filter(name__in=names).exclude(state="succeeded").count()
    if bad:
        print(f"{bad} of {count} jobs did not succeed", flush=True)
    return makespan, steps(names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    script = TRAINER.format(loops=calibrate(args.seconds))
    plain = plain_makespan(script, args.jobs)
    with tempfile.TemporaryDirectory(prefix="bench-job-start-") as tmp:
        ours, found = portal_makespan(script, args.jobs, Path(tmp))
    print(f"{args.jobs} one-core jobs of ~{args.seconds:g} s on 2 cores ({datetime.now():%Y-%m-%d %H:%M}):")
    print(f"  plain python two at a time {plain:.1f} s; through the portal {ours:.1f} s = {ours / plain:.2f}x")
    print(f"  per job (medians): queued -> admitted {median_ms(found['admit'])}; admitted -> its process running "
          f"{median_ms(found['start'])}; running -> "
          f"entry's first line {median_ms(found['entry'])}; the entry's run {statistics.median(found['run']):.2f} s; "
          f"exit -> seen finished {median_ms(found['seen'])}; a job's end -> the next one's admission "
          f"{median_ms(found['next'])}")  # fmt: skip


if __name__ == "__main__":
    main()
