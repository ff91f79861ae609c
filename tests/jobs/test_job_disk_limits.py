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


# Each way a job could reach its own log.txt (or log.times) but through the launcher's stdout, then a flood.
HIJACK = r"""
import errno, os, sys
folder = os.path.join(os.environ["PADDLECLOUD_OUTPUT_DIR"], "trainer_0")
log, times = os.path.join(folder, "log.txt"), os.path.join(folder, "log.times")

def through_proc():
    held = [f"/proc/{p}/fd/{n}" for p in os.listdir("/proc") if p.isdigit() for n in os.listdir(f"/proc/{p}/fd")]
    mine = [h for h in held if os.path.realpath(h).endswith(("/log.txt", "/log.times"))]
    print("descriptors of the log in the sandbox:", len(mine), flush=True)
    if not mine:
        raise OSError(errno.ENOENT, "none")
    for h in mine:
        with open(h, "ab") as f:
            f.write(b"P" * (4 << 20))

attempts = {
    "append": lambda: open(log, "ab").write(b"A" * (4 << 20)),
    "read-write": lambda: os.pwrite(os.open(log, os.O_RDWR), b"W" * (4 << 20), 0),
    "times": lambda: open(times, "ab").write(b"T" * (1 << 20)),
    "unlink": lambda: os.unlink(log),
    "rename": lambda: os.rename(log, log + ".old"),
    "proc": through_proc,
}
for what, attempt in attempts.items():
    try:
        attempt()
        print(what, "WENT THROUGH", flush=True)
    except OSError as exc:
        print(what, "refused:", errno.errorcode.get(exc.errno, exc.errno), flush=True)
for number in range(4 * 1024 * 1024 // 64):
    sys.stdout.buffer.write(b"flood %08d " % number + b"f" * 48 + b"\n")
"""


def _submit(api: APIClient, local_dc: Datacenter, name: str, script: str) -> None:
    """alice's one-trainer job `name` running `script`, its package uploaded to her home."""
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / name
    package.mkdir(parents=True)
    (package / "main.py").write_text(script)
    spec = {"jobname": name, "entry": "python main.py", "parallelism": 1, "pservers": 0}
    assert api.post("/api/v1/jobs", spec, format="json").status_code == 201


def _output(job: Job) -> Path:
    return Path(job.datacenter.storage_root, "home", "alice", "jobs", job.name, "output", job.uid)


def test_a_job_writing_past_the_storage_quota_is_stopped_within_seconds(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    Quota.objects.create(user=alice, datacenter=local_dc, storage="20Mi")
    _submit(alice_api, local_dc, "fill", FILLER)
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
    # (Plus what ext4 allocated past the end of the file being written when it was measured, and what the user's
    # layer cache holds, where an earlier test built a layer for the same user id.)
    past_end = r"( and [0-9.]+ [KMG]?i?B allocated past their ends)?"
    layers = r"( and [0-9.]+ [KMG]?i?B in your jobs' requirement layers \(outside your home\))?"
    quota_rule = r"your files take [0-9.]+ MiB" + past_end + layers
    assert re.search(quota_rule + r", over the quota of 20\.0 MiB", job.message), job.message
    assert stopped_after < 20, stopped_after  # measured every 5 s, reconciled every 2 s, stopped at once
    assert alive(job) == []
    written = (_output(job) / "fill.bin").stat().st_size
    assert written < 200 * MiB and "wrote everything" not in (_output(job) / "trainer_0" / "log.txt").read_text()


def test_a_flooding_job_leaves_at_most_its_log_limit_on_disk(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(job_log_limit="1Mi")
    _submit(alice_api, local_dc, "flood", FLOOD)
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


def test_a_job_cannot_write_its_log_past_the_limit_by_a_descriptor_of_its_own(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    """The supervisor writes log.txt and log.times from the launcher's stdout, outside the sandbox; inside, both
    are read-only mount points: no open, rename, unlink or /proc/<pid>/fd reaches them for writing. (Moving a
    folder above them moves the log with it, out of the portal's sight: the job's own loss, and the cap holds.)"""
    Datacenter.objects.filter(pk=local_dc.pk).update(job_log_limit="1Mi")
    _submit(alice_api, local_dc, "hijack", HIJACK)
    job = finished("hijack", worker)
    assert job.state == JobState.SUCCEEDED, job.message
    folder = _output(job) / "trainer_0"
    log = (folder / "log.txt").read_bytes()
    said = log.decode(errors="replace")
    assert "WENT THROUGH" not in said, said[:2000]
    for what in ("append", "read-write", "times", "unlink", "rename"):
        assert re.search(rf"^{what} refused: E(ROFS|ACCES|PERM|BUSY)$", said, re.M), (what, said[:2000])
    assert "descriptors of the log in the sandbox: 0" in said  # bwrap closed what it bound
    assert len(log) <= MiB + 64 * 1024 + 120  # the cap held: 4 MiB of flood, none of the 12 MiB written around it
    assert b"A" * 4096 not in log and b"W" * 4096 not in log and b"P" * 4096 not in log
    assert b"flood 00000000 " in log and b"flood 00065535 " in log  # the head and the end, through stdout
    assert (folder / "log.times").stat().st_size < 64 * 1024  # 16-byte records, none of the job's bytes
    assert not (folder / "log.txt.old").exists()
