"""Benchmark: log latency (a trainer's line to a follower of the logs API) and opening a 10 MB log at its end.

The embedded default (a private var directory: SQLite, the filesystem broker) with a real Celery worker
with beat and the local engine. A 1-trainer job prints a line holding its wall-clock time every 0.1 s;
a follower polls `GET /api/v1/jobs/<name>/logs?cursor=` every 0.5 s, as the log viewer does, and a
line's latency is its arrival minus the time it holds (same host clock). Then a 10 MB log is put in
a finished job's worker folder and the viewer's first request (`?tail=1000`, the last screen) is timed.
Prints p50/p95 (goals: latency p95 <= 1 s, last screen <= 2 s). Prints figures; it is not a test.

    .venv/bin/python bench/log_latency.py [--lines 100] [--poll 0.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paddlecloud.contract import logtimes  # noqa: E402
from paddlecloud.contract.layout import worker_folder  # noqa: E402

from bench.pages import percentile, setup_django  # noqa: E402

TRAINER = """import time
for i in range({lines} + 20):
    print(f"line {{i}} at {{time.time():.6f}}", flush=True)
    time.sleep(0.1)
"""


def follow(api: Any, name: str, lines: int, poll: float) -> list[float]:
    latencies: list[float] = []
    cursor, partial = "", ""
    deadline = time.monotonic() + 300
    while len(latencies) < lines and time.monotonic() < deadline:
        data = api.get(f"/api/v1/jobs/{name}/logs", {"worker": "trainer-0", "cursor": cursor}).json()
        arrived = time.time()
        cursor = data["cursor"]
        text = partial + data["text"]
        *whole, partial = text.split("\n")
        for line in whole:
            if line.startswith("line ") and " at " in line:
                latencies.append(arrived - float(line.rsplit(" ", 1)[1]))
        time.sleep(poll)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=100)
    parser.add_argument("--poll", type=float, default=0.5, help="the follower's polling interval (viewer: 0.5 s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as tmp:
        work = Path(tmp)
        setup_django(work / "var")
        from django.contrib.auth.models import User
        from rest_framework.test import APIClient

        from datacenters.models import Datacenter, Engine, StorageKind
        from jobs.files import layout
        from jobs.models import Job, JobState
        from tests.workers import start_worker

        root = work / "pfs"
        (root / "home").mkdir(parents=True)
        dc = Datacenter.objects.create(name="local", engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL,
                                       storage_root=str(root))
        user = User.objects.create(username="bench")
        api = APIClient()
        api.force_authenticate(user)
        package = root / "home" / "bench" / "jobs" / "talk"
        package.mkdir(parents=True)
        (package / "train.py").write_text(TRAINER.format(lines=args.lines))

        worker = start_worker(work, beat=True, concurrency=2)  # every lane, on Celery's default queue names
        try:
            spec = {"jobname": "talk", "entry": "python train.py", "parallelism": 1, "pservers": 0}
            response = api.post("/api/v1/jobs", spec, format="json")
            assert response.status_code == 201, response.content
            latencies = follow(api, "talk", args.lines, args.poll)
        finally:
            worker.stop()
            if os.environ.get("BENCH_WORKER_LOG"):
                print(worker.log()[-20000:])
        if len(latencies) < args.lines:
            raise SystemExit(f"only {len(latencies)} lines arrived: {Job.objects.get(name='talk').message}")
        print(f"line written -> in a follower polling every {args.poll}s ({len(latencies)} lines): "
              f"p50 {statistics.median(latencies):.3f}s, p95 {percentile(latencies, 0.95):.3f}s, "
              f"max {max(latencies):.3f}s")

        # A finished job with a 10 MB log: the viewer's first request asks for its last 1000 lines.
        big = Job.objects.create(owner=user, datacenter=dc, name="big", uid="big-00001", state=JobState.SUCCEEDED,
                                 released=True, spec={"parallelism": 1, "pservers": 0, "entry": "python train.py"})
        folder = Path(layout.output_dir(dc, "bench", "big", big.uid)) / worker_folder("trainer", 0)
        folder.mkdir(parents=True, exist_ok=True)
        line = "pass 0 step 000000 loss 0.123456 " + "x" * 60 + "\n"
        # With its launcher's times: a record per line, as lines 10 ms or more apart get (the most there can be).
        with (folder / "log.txt").open("wb") as out, (folder / logtimes.TIMES_NAME).open("wb") as stamps:
            for i in range(10 * 1024 * 1024 // len(line)):
                stamps.write(logtimes.RECORD.pack(out.tell(), 1.7e9 + i * 0.01))
                out.write(line.replace("000000", f"{i:06d}").encode())
        size = (folder / "log.txt").stat().st_size
        times = []
        for _ in range(20):
            start = time.perf_counter()
            data = api.get("/api/v1/jobs/big/logs", {"worker": "trainer-0", "tail": "1000"}).json()
            times.append(time.perf_counter() - start)
            assert data["text"].count("\n") == 1000 and data["complete"], data["cursor"]
            assert len(data["times"]) == 1000 and None not in data["times"]
        print(f"last screen of a {size / 1e6:.1f} MB log (?tail=1000, the viewer's first request, 20 tries): "
              f"p50 {statistics.median(times):.3f}s, max {max(times):.3f}s")


if __name__ == "__main__":
    main()
