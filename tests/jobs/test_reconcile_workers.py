"""The workers table tells the truth at the edges: who exited 0, who was killed (and how), why a start failed."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.engines.local.engine import LocalEngine
from jobs.files.logfiles import open_log_fd
from jobs.models import Job
from tests.jobs.conftest import EXAMPLES, put_package
from tests.jobs.test_local_engine import finished
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

# Trainer i behaves as TRUTH_<i> says: fail (exit 3 after 1 s), graceful (exits 0 on SIGTERM),
# stubborn (ignores SIGTERM), anything else runs until it is killed.
TRUTH = """
import os, signal, sys, time
me = int(os.environ["PADDLE_TRAINER_ID"])
mode = os.environ.get(f"TRUTH_{me}", "run")
if mode == "graceful":
    # os._exit: the launcher relays the SIGTERM to the group, and a second one must not land mid-shutdown.
    signal.signal(signal.SIGTERM, lambda *_: (print("saving, then exiting 0", flush=True), os._exit(0)))
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(f"trainer {me} {mode}", flush=True)
if mode == "fail":
    time.sleep(1)
    sys.exit(3)
while True:
    time.sleep(0.1)
"""
# exec: the trainer itself gets the signals, not a shell that would die of them first.
SPEC: dict[str, Any] = {"jobname": "truth", "entry": "exec python train.py", "parallelism": 2, "pservers": 0}


@pytest.fixture
def truth_package(local_dc: Datacenter, alice: User) -> Path:
    package = Path(local_dc.storage_root) / "home" / "alice" / "jobs" / "truth"
    package.mkdir(parents=True)
    (package / "train.py").write_text(TRUTH)
    return package


@pytest.fixture
def quick_worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A worker with a 3 s kill grace, so SIGKILL cases do not wait 10 s."""
    process = start_worker(tmp_path, beat=True, concurrency=2, extra_env={"PADDLECLOUD_KILL_GRACE_SECONDS": "3"})
    yield process
    process.stop()


@pytest.fixture
def patient_worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A worker with a 30 s kill grace: trainers that end on SIGTERM must never reach SIGKILL, even when a
    loaded machine takes seconds to run their launchers' exit."""
    process = start_worker(tmp_path, beat=True, concurrency=2, extra_env={"PADDLECLOUD_KILL_GRACE_SECONDS": "30"})
    yield process
    process.stop()


def workers(api: APIClient, name: str) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in api.get(f"/api/v1/jobs/{name}/workers").json()["results"]}


def test_a_trainer_that_exited_0_is_succeeded_although_another_one_failed(
    alice_api: APIClient, truth_package: Path, quick_worker: WorkerProcess
) -> None:
    spec = {**SPEC, "env": {"TRUTH_0": "graceful", "TRUTH_1": "fail"}}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("truth", quick_worker)
    assert (job.state, job.reason, job.exit_code) == ("failed", "TrainerFailed", 3)
    seen = workers(alice_api, "truth")
    assert (seen["trainer-0"]["state"], seen["trainer-0"]["exit_code"]) == ("succeeded", 0), seen
    assert (seen["trainer-1"]["state"], seen["trainer-1"]["exit_code"]) == ("failed", 3), seen


def test_once_the_job_failed_no_worker_is_running_and_a_killed_one_shows_sigkill_137(
    alice_api: APIClient, truth_package: Path, quick_worker: WorkerProcess
) -> None:
    spec = {**SPEC, "env": {"TRUTH_0": "stubborn", "TRUTH_1": "fail"}}
    alice_api.post("/api/v1/jobs", spec, format="json")
    wait_for(lambda: Job.objects.filter(name="truth", state="failed").exists(), "failure", 60, watch=quick_worker)
    # At once, while trainer 0 still ignores its SIGTERM: nothing is shown running or pending.
    states = {name: w["state"] for name, w in workers(alice_api, "truth").items()}
    assert "running" not in states.values() and "pending" not in states.values(), states
    job = finished("truth", quick_worker)
    assert not job.workers.filter(state__in=["running", "pending"]).exists()
    trainer = job.workers.get(role="trainer", index=0)
    assert (trainer.state, trainer.exit_code) == ("killed", 137)
    assert "SIGKILL" in trainer.message


def test_a_killed_job_shows_each_worker_killed_by_sigterm_with_143(
    alice_api: APIClient, truth_package: Path, patient_worker: WorkerProcess
) -> None:
    alice_api.post("/api/v1/jobs", SPEC, format="json")
    wait_for(lambda: Job.objects.filter(name="truth", state="running").exists(), "running", 60, watch=patient_worker)
    assert alice_api.delete("/api/v1/jobs/truth").json()["state"] == "killed"
    states = {name: w["state"] for name, w in workers(alice_api, "truth").items()}
    assert set(states.values()) == {"killed"}, states
    job = finished("truth", patient_worker)
    for trainer in job.workers.all():
        assert (trainer.state, trainer.exit_code) == ("killed", 143), trainer.message
        assert "SIGTERM" in trainer.message


def test_a_failed_requirements_install_shows_pips_last_error(
    alice_api: APIClient, truth_package: Path, quick_worker: WorkerProcess
) -> None:
    (truth_package / "requirements.txt").write_text("-r does-not-exist.txt\n")
    alice_api.post("/api/v1/jobs", {**SPEC, "parallelism": 1}, format="json")
    job = finished("truth", quick_worker, timeout=300)
    assert (job.state, job.exit_code) == ("failed", 70)
    trainer = job.workers.get(role="trainer", index=0)
    expected = "installing requirements failed: ERROR: Could not open requirements file"
    assert trainer.message.startswith(expected), trainer.message
    assert "does-not-exist.txt" in trainer.message and expected in job.message


def last_line(api: APIClient, name: str, worker: str) -> str:
    text: str = api.get(f"/api/v1/jobs/{name}/logs?worker={worker}").json()["text"]
    return [line for line in text.splitlines() if line.strip()][-1]


def test_pservers_stopped_after_success_end_their_logs_saying_so(
    alice_api: APIClient, fake_package: Path, quick_worker: WorkerProcess
) -> None:
    spec = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 2}
    alice_api.post("/api/v1/jobs", spec, format="json")
    job = finished("fake", quick_worker)
    assert job.state == "succeeded", job.message
    for index in (0, 1):
        pserver = job.workers.get(role="pserver", index=index)
        assert (pserver.state, pserver.message) == ("succeeded", "stopped after every trainer succeeded")
        line = last_line(alice_api, "fake", f"pserver-{index}")
        assert re.search(rf"^\[paddlecloud\] \S+ pserver {index} stopped after every trainer succeeded$", line), line


@pytest.mark.paddle
def test_paddle_pservers_stopped_after_success_print_no_fatal_error(
    alice_api: APIClient, alice: User, local_dc: Datacenter, quick_worker: WorkerProcess
) -> None:
    put_package(local_dc, alice, "fit", EXAMPLES / "fit_a_line")
    spec = {"jobname": "fit", "entry": "python train.py", "parallelism": 2, "pservers": 2, "passes": 2}
    alice_api.post("/api/v1/jobs", spec, format="json")
    job = finished("fit", quick_worker, timeout=300)
    assert job.state == "succeeded", job.message
    for index in (0, 1):
        text = alice_api.get(f"/api/v1/jobs/fit/logs?worker=pserver-{index}").json()["text"]
        assert "FatalError" not in text and "Termination signal" not in text, text[-3000:]
        assert last_line(alice_api, "fit", f"pserver-{index}").endswith("stopped after every trainer succeeded")


def test_the_engine_never_follows_a_log_link_out_of_the_users_home(
    alice: User, local_dc: Datacenter, tmp_path: Path
) -> None:
    secret = tmp_path / "portal-secret"
    secret.write_text("[paddlecloud-launch] error: the secret\n")
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="link", uid="link-1", spec=SPEC)
    worker = job.workers.create(role="trainer", index=0)
    engine = LocalEngine(local_dc)
    directory = engine.supervisor.worker_dir(job, "trainer", 0)
    directory.mkdir(parents=True)
    (directory / "log.txt").symlink_to(secret)
    assert engine.judge.log_reason(job, worker) == ""
    with pytest.raises(OSError):
        open_log_fd(job, worker.name, os.O_WRONLY | os.O_APPEND)
    assert secret.read_text() == "[paddlecloud-launch] error: the secret\n"
    (directory / "log.txt").unlink()
    (directory / "log.txt").write_text("[paddlecloud-launch] error: installing requirements failed: ERROR: x\n")
    assert engine.judge.log_reason(job, worker) == "installing requirements failed: ERROR: x"
