"""Jobs in the real sandbox, through a real worker: what a job sees, that it dies whole, its memory limit.

Each assertion is about what the job itself printed (its log) or what is left on the host afterwards.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.local import cgroups
from jobs.models import Job
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("needs_sandbox")]

PROBE = r"""
import os, sys
from pathlib import Path
home = "/pfs/local/home/alice"
print("uid", os.getuid(), "gid", os.getgid())
print("data:", Path(home, "data/hello.txt").read_text().strip())
print("public:", Path("/pfs/local/public/shared.txt").read_text().strip())
try:
    Path("/pfs/local/public/mine.txt").write_text("x")
    print("public write: allowed")
except OSError as e:
    print("public write: refused", e.strerror)
Path(os.environ["PADDLECLOUD_OUTPUT_DIR"], "model.txt").write_text("weights")
print("output:", os.environ["PADDLECLOUD_OUTPUT_DIR"])
for path in sys.argv[1:]:
    print("visible" if os.path.exists(path) else "hidden", path)
print("env:", sorted(k for k in os.environ if "SECRET" in k or "DATABASE" in k or "ENCRYPTION" in k))
print("host net:", sorted(os.listdir("/sys/class/net")), sorted(os.listdir("/sys/devices/virtual/net")))
print("host cmdline:", len(Path("/proc/cmdline").read_bytes()), "bytes")
print("cpus:", len([p for p in os.listdir("/sys/devices/system/cpu") if p[3:].isdigit()]) > 0)
"""

DETACHER = r"""
import os, subprocess, sys, time
# A child in its own session that ignores SIGTERM: only the PID namespace can end it.
stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
subprocess.Popen([sys.executable, "-c", stubborn, os.environ["MARKER"]], start_new_session=True)
print("detached", flush=True)
time.sleep(float(os.environ.get("HOLD", "0")))
"""


def _package(local_dc: Datacenter, name: str, script: str) -> Path:
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / name
    package.mkdir(parents=True)
    (package / "probe.py").write_text(script)
    return package


def _log(job: Job, worker: str = "trainer_0") -> str:
    out = Path(job.datacenter.storage_root) / "home" / job.owner.username / "jobs" / job.name / "output" / job.uid
    return (out / worker / "log.txt").read_text()


def _marked(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker``."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes().split(b"\0"):
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def test_a_job_sees_its_pfs_paths_and_nothing_of_the_portal(
    alice_api: APIClient, alice: User, bob: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    root = Path(local_dc.storage_root)
    (root / "home" / "alice" / "data").mkdir(parents=True)
    (root / "home" / "alice" / "data" / "hello.txt").write_text("alice's data\n")
    (root / "home" / "bob").mkdir(parents=True)
    (root / "home" / "bob" / "secret.txt").write_text("bob's\n")
    (root / "public" / "shared.txt").write_text("for everyone\n")
    _package(local_dc, "world", PROBE)
    hidden = [
        "/pfs/local/home/bob",
        str(root / "home" / "bob"),
        str(settings.VAR_DIR),
        str(Path(settings.VAR_DIR) / "encryption_key"),
        str(Path(settings.BASE_DIR) / "portal"),
        "/root/.ssh",
    ]
    spec = {"jobname": "world", "entry": "python probe.py " + " ".join(hidden), "parallelism": 1, "pservers": 0}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("world", worker)
    log = _log(job)
    assert job.state == "succeeded", log
    assert "data: alice's data" in log and "public: for everyone" in log
    assert "public write: refused Read-only file system" in log
    uid = int(log.split("uid ", 1)[1].split()[0])
    assert uid != 0 and (os.geteuid() != 0 or uid == settings.PADDLECLOUD_JOB_UID_BASE + alice.pk)
    for path in hidden:
        assert f"hidden {path}\n" in log
    assert "env: []" in log
    assert "host net: [] []" in log and "host cmdline: 0 bytes" in log  # the host's network and boot line hidden
    assert "cpus: True" in log  # what frameworks read of /sys (the CPU topology) is still there
    output = f"/pfs/local/home/alice/jobs/world/output/{job.uid}"
    assert f"output: {output}" in log
    # What it wrote to $PADDLECLOUD_OUTPUT_DIR is the user's, in their home, and the portal can use it.
    model = root / "home" / "alice" / "jobs" / "world" / "output" / job.uid / "model.txt"
    assert model.read_text() == "weights"
    model.unlink()


def test_a_detached_child_ends_with_the_job_that_succeeded(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    marker = f"pc-detached-{os.getpid()}-ok"
    _package(local_dc, "detach", DETACHER)
    spec = {"jobname": "detach", "entry": "python probe.py", "parallelism": 1, "pservers": 0, "env": {"MARKER": marker}}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("detach", worker)
    assert job.state == "succeeded" and "detached" in _log(job)
    wait_for(lambda: not _marked(marker), "the detached child to be gone", 10, watch=worker)


def test_a_detached_child_ends_with_the_job_that_was_killed(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    marker = f"pc-detached-{os.getpid()}-kill"
    _package(local_dc, "detachk", DETACHER)
    spec = {
        "jobname": "detachk",
        "entry": "python probe.py",
        "parallelism": 1,
        "pservers": 0,
        "env": {"MARKER": marker, "HOLD": "600"},
    }
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    pids = wait_for(lambda: _marked(marker), "the detached child to start", 60, watch=worker)
    assert isinstance(pids, list) and pids
    assert alice_api.delete("/api/v1/jobs/detachk").status_code == 200
    job = finished("detachk", worker, timeout=60)
    assert job.state == "killed"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
        time.sleep(0.2)
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()], "a process of the killed job is still there"


def test_a_job_over_its_memory_limit_ends_oom_killed(
    alice_api: APIClient, alice: User, local_dc: Datacenter, worker: WorkerProcess
) -> None:
    hierarchy, why = cgroups.usable()
    if hierarchy is None:
        print(f"skipped: cgroups are not writable here: {why}")
        pytest.skip(f"cgroups are not writable here: {why}")
    _package(local_dc, "hog", "block = b'x' * (512 << 20)\nprint('allocated', len(block))\n")
    spec = {"jobname": "hog", "entry": "python probe.py", "parallelism": 1, "pservers": 0, "memory": "128Mi"}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("hog", worker)
    assert (job.state, job.reason) == ("failed", "OOMKilled"), (job.message, _log(job))
    assert job.exit_code == 128 + signal.SIGKILL and "memory limit (128Mi)" in job.message
    assert "memory limit (128Mi)" in job.workers.get(role="trainer").message  # the row says it, not just SIGKILL
    assert "allocated" not in _log(job)
