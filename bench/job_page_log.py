"""The job page of a job with a large log, in a real browser: DOMContentLoaded, and the log's first lines shown.

    .venv/bin/python bench/job_page_log.py                  # a 10 MiB log, 10 loads
    .venv/bin/python bench/job_page_log.py --mib 100 --loads 5

It starts a portal as `make run` does (bench/upload.py's Portal: gunicorn with portal/gunicorn_conf.py, DEBUG off,
the embedded defaults: SQLite, a private var directory), gives alice a finished job whose trainer wrote a log of
`--mib` MiB of training-like lines, logs in with headless Chromium (Playwright) and loads the job page `--loads`
times (the cache cleared by a new context each time). For each load it reads the browser's own navigation timing
(DOMContentLoaded, from the request's start) and the time until the log pane shows its first lines (the viewer
reads the log's tail, not the whole file). Goal: DOMContentLoaded <= 300 ms with a 10 MiB log. Prints figures; it
is not a test.
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

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.log_search import write_log  # noqa: E402
from bench.upload import PYTHON, Portal  # noqa: E402

PASSWORD = "bench-password-1"  # noqa: S105  # the throwaway account of a throwaway portal
MAKE_JOB = """
from django.contrib.auth.models import User
from django.utils import timezone
from datacenters.models import Datacenter
from jobs.models import Job, JobState, Role, Worker
from jobs.spec import requested
from pathlib import Path
alice, dc = User.objects.get(username="alice"), Datacenter.objects.get(name="local")
spec = {"parallelism": 1, "pservers": 0, "entry": "python train.py", "jobname": "big-log"}
cpu, memory, gpu = requested(spec)
now = timezone.now()
job = Job.objects.create(owner=alice, datacenter=dc, name="big-log", uid="big-log-ab12c", spec=spec,
                         state=JobState.SUCCEEDED, cpu_request=cpu, memory_request=memory, gpu_request=gpu,
                         admitted_at=now, started_at=now, finished_at=now, released=True)
Worker.objects.create(job=job, role=Role.TRAINER, index=0, state="succeeded", exit_code=0)
print(Path(dc.storage_root, "home", "alice", "jobs", job.name, "output", job.uid, "trainer_0"))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=10)
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-job-page-") as tmp:
        portal = Portal(Path(tmp))
        portal.start("alice", PASSWORD)
        try:
            made = subprocess.run([str(PYTHON), "manage.py", "shell", "-c", MAKE_JOB], cwd=ROOT, env=portal.env,
                                  check=True, capture_output=True, text=True)  # fmt: skip
            folder = Path(made.stdout.strip().splitlines()[-1])
            folder.mkdir(parents=True, exist_ok=True)
            write_log(folder / "log.txt", args.mib)  # log_search's training-like lines
            loaded, shown = measure(portal.url, args.loads)
        finally:
            portal.stop()
    print(f"job page with a {args.mib} MiB log, {args.loads} loads (headless Chromium, gunicorn as `make run`):")
    for what, values in (("DOMContentLoaded", loaded), ("log's first lines shown", shown)):
        print(f"  {what}: median {statistics.median(values):.0f} ms, max {max(values):.0f} ms "
              f"(each: {', '.join(f'{v:.0f}' for v in values)})")  # fmt: skip
    print("goal: DOMContentLoaded <= 300 ms")


def measure(url: str, loads: int) -> tuple[list[float], list[float]]:
    loaded, shown = [], []
    with sync_playwright() as play:
        # The system's Chromium, as the browser tests use it (tests/browser/conftest.py).
        chromium = os.environ.get("PADDLECLOUD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
        browser = play.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        for _ in range(loads):
            context = browser.new_context()  # a cold cache each load, as a first visit
            page = context.new_page()
            page.goto(f"{url}/login/")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/")
            began = time.perf_counter()
            page.goto(f"{url}/jobs/big-log-ab12c/#logs", wait_until="domcontentloaded")
            page.wait_for_selector("#log:has-text('step')", timeout=30_000)  # no string eval: the page's CSP
            shown.append((time.perf_counter() - began) * 1000)
            loaded.append(page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"))
            context.close()
        browser.close()
    return loaded, shown


if __name__ == "__main__":
    main()
