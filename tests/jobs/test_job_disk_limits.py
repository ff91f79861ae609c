"""Real local jobs against the disk limits: writing past the storage quota stops the job, a log flood is capped."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, Quota
from jobs.models import Job, JobState, Reason
from tests.jobs.conftest import alive
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

MiB = 1024 * 1024

# 200 MiB, 2 MiB at a time, 5 writes a second: past a 20 MiB quota after 2 s, done after 20 s if never stopped.
FILLER = r"""
import os, time
path = os.path.join(os.environ["PADDLECLOUD_OUTPUT_DIR"], "fill.bin")
block = b"x" * (2 * 1024 * 1024)
with open(path, "wb") as out:
    for step in range(100):
        out.write(block)
        out.flush()
        print("wrote", (step + 1) * 2, "MiB", flush=True)
        time.sleep(0.2)
print("wrote everything")
"""

FLOOD = r"""
import sys
write = sys.stdout.buffer.write
for number in range(20 * 1024 * 1024 // 64):
    write(b"line %08d " % number + b"z" * 49 + b"\n")
"""


def _package(local_dc: Datacenter, name: str, script: str) -> None:
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / name
    package.mkdir(parents=True)
    (package / "main.py").write_text(script)


def _output(job: Job) -> Path:
    return Path(job.datacenter.storage_root, "home", "alice", "jobs", job.name, "output", job.uid)


def test_a_job_writing_past_the_storage_quota_is_stopped_within_seconds(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, storage="20Mi")
    _package(local_dc, "fill", FILLER)
    spec = {"jobname": "fill", "entry": "python main.py", "parallelism": 1, "pservers": 0}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    home = Path(local_dc.storage_root, "home", "alice")

    def past_quota() -> float | None:
        # The quota counts the whole home (package, logs, fill.bin): the job may be stopped before fill.bin
        # alone passes 20 MiB, and before this poll sees the home pass it.
        ended = Job.objects.filter(name="fill", state__in=[JobState.FAILED, JobState.SUCCEEDED]).exists()
        held = sum(f.stat().st_size for f in home.rglob("*") if f.is_file() and not f.is_symlink())
        return time.monotonic() if ended or held > 20 * MiB else None

    over = wait_for(past_quota, "the job to write past its quota", 90, watch=worker)
    job = finished("fill", worker, timeout=60)
    stopped_after = time.monotonic() - over
    assert (job.state, job.reason) == (JobState.FAILED, Reason.STORAGE_QUOTA_EXCEEDED), job.message
    assert re.search(r"your files take [0-9.]+ MiB, over the quota of 20\.0 MiB", job.message), job.message
    assert stopped_after < 20, stopped_after  # measured every 5 s, reconciled every 2 s, stopped at once
    assert alive(job) == []
    written = (_output(job) / "fill.bin").stat().st_size
    assert written < 200 * MiB and "wrote everything" not in (_output(job) / "trainer_0" / "log.txt").read_text()


def test_a_flooding_job_leaves_at_most_its_log_limit_on_disk(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(job_log_limit="1Mi")
    _package(local_dc, "flood", FLOOD)
    spec = {"jobname": "flood", "entry": "python main.py", "parallelism": 1, "pservers": 0}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("flood", worker)
    assert job.state == JobState.SUCCEEDED, job.message
    log = (_output(job) / "trainer_0" / "log.txt").read_bytes()
    assert len(log) <= MiB + 64 * 1024 + 120
    assert b"line 00000000 " in log and b"line 00327679 " in log  # the head and the end
    dropped = re.search(rb"\[paddlecloud\] dropped ([0-9]+) bytes of output here \(log limit 1\.0 MiB\)", log)
    assert dropped is not None and int(dropped.group(1)) > 19 * MiB
    text, cursor = "", ""
    for _ in range(10):  # the API's chunks, cursor to cursor, give the file whole: head, marker, end
        chunk = alice_api.get(f"/api/v1/jobs/flood/logs?worker=trainer-0&cursor={cursor}").json()
        text, cursor = text + chunk["text"], chunk["cursor"]
        if chunk["complete"]:
            break
    assert text.encode() == log
