"""The local engine end to end: a real Celery worker with beat follows jobs to their end.

These jobs use a stand-in package (no Paddle), so each takes seconds; test_paddle_jobs.py runs
the real examples.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from datacenters import quota
from datacenters.models import Datacenter
from jobs.models import Job
from tests.jobs.conftest import alive
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True)]

SPEC: dict[str, Any] = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 2}


def finished(name: str, worker: WorkerProcess, timeout: float = 90) -> Job:
    def done() -> Job | None:
        job = Job.objects.filter(name=name).order_by("-created_at").first()
        return job if job and job.state in ("succeeded", "failed", "killed") and job.released else None

    job = wait_for(done, f"job {name} to finish", timeout, watch=worker)
    assert isinstance(job, Job)
    return job


def test_a_ps_job_succeeds_and_every_process_is_gone(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path, worker: WorkerProcess
) -> None:
    created = alice_api.post("/api/v1/jobs", SPEC, format="json")
    assert created.status_code == 201, created.json()
    job = finished("fake", worker)
    assert (job.state, job.reason, job.exit_code) == ("succeeded", "", 0)
    assert job.trainers_succeeded == 2 and job.pservers_running == 0
    assert alive(job) == []
    workers = alice_api.get("/api/v1/jobs/fake/workers").json()["results"]
    assert [(w["name"], w["state"]) for w in workers] == [
        ("pserver-0", "succeeded"),
        ("pserver-1", "succeeded"),
        ("trainer-0", "succeeded"),
        ("trainer-1", "succeeded"),
    ]
    log = alice_api.get("/api/v1/jobs/fake/logs?worker=trainer-1").json()
    assert log["complete"] and "trainer 1 step 4 loss 2.0000" in log["text"] and "trainer 1 done" in log["text"]
    assert "SECRET" not in log["text"] and "DATABASE_URL" not in log["text"]
    # Its logs were written straight to alice's home; the quota counts them once the job is released.
    output = sum(f.stat().st_size for f in Path(local_dc.storage_root, "home", "alice").rglob("*") if f.is_file())
    wait_for(lambda: quota.usage(alice, local_dc).storage == output, "storage usage recomputed", 30, watch=worker)


def test_a_trainer_exiting_3_fails_the_job_with_its_code(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    spec = {**SPEC, "env": {"FAKE_FAIL_TRAINER": "1", "FAKE_EXIT_CODE": "3", "FAKE_STEPS": "20"}}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("fake", worker)
    assert (job.state, job.reason, job.exit_code) == ("failed", "TrainerFailed", 3)
    assert "trainer 1 exited with code 3" in job.message
    assert alive(job) == []
    trainer = job.workers.get(role="trainer", index=1)
    assert (trainer.state, trainer.exit_code) == ("failed", 3)


def test_a_failing_trainer_is_retried_then_backoff_limit(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    spec = {**SPEC, "max_retries": 2, "env": {"FAKE_FAIL_TRAINER": "0", "FAKE_STEPS": "4"}}
    alice_api.post("/api/v1/jobs", spec, format="json")
    job = finished("fake", worker)
    assert (job.state, job.reason, job.exit_code) == ("failed", "BackoffLimit", 3)
    assert job.workers.get(role="trainer", index=0).restarts == 2
    log = alice_api.get("/api/v1/jobs/fake/logs?worker=trainer-0").json()["text"]
    assert log.count("=== attempt started") == 3


def test_a_pserver_killed_fails_the_job_as_pserver_lost(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    spec = {**SPEC, "env": {"FAKE_STEPS": "600"}}
    alice_api.post("/api/v1/jobs", spec, format="json")
    running = wait_for(lambda: Job.objects.filter(name="fake", state="running").first(), "running", 60, watch=worker)
    assert isinstance(running, Job)
    pid = running.engine_data["pserver-1"]["pid"]
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    job = wait_for(lambda: Job.objects.filter(name="fake", state="failed").first(), "failure", 30, watch=worker)
    assert isinstance(job, Job)
    assert time.monotonic() - killed_at < 10
    assert (job.reason, job.exit_code) == ("PserverLost", 137)
    assert "pserver 1 exited with code 137 (killed by SIGKILL)" in job.message
    job = finished("fake", worker)
    assert alive(job) == []


def test_kill_while_running_leaves_nothing_and_frees_the_name(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    alice_api.post("/api/v1/jobs", {**SPEC, "env": {"FAKE_STEPS": "600"}}, format="json")
    wait_for(lambda: Job.objects.filter(name="fake", state="running").first(), "running", 60, watch=worker)
    response = alice_api.delete("/api/v1/jobs/fake")
    assert response.json()["state"] == "killed"
    again = alice_api.post("/api/v1/jobs", SPEC, format="json")
    assert again.status_code == 201, again.json()
    first = finished("fake", worker)  # the newer run
    killed = Job.objects.get(state="killed")
    wait_for(lambda: Job.objects.get(pk=killed.pk).released, "kill to release", 30, watch=worker)
    assert alive(killed) == [] and alive(first) == []
    assert first.state == "succeeded"


def test_a_worker_killed_mid_job_is_replaced_and_the_job_still_succeeds(
    alice_api: APIClient, fake_package: Path, tmp_path: Path, transactional_db: None
) -> None:
    first = start_worker(tmp_path, beat=True)
    try:
        alice_api.post("/api/v1/jobs", {**SPEC, "env": {"FAKE_STEPS": "40"}}, format="json")
        wait_for(lambda: Job.objects.filter(name="fake", state="running").first(), "running", 60, watch=first)
    finally:
        first.stop(signal.SIGKILL)
    assert Job.objects.get(name="fake").state == "running"
    (tmp_path / "again").mkdir()
    second = start_worker(tmp_path / "again", beat=True)
    try:
        job = finished("fake", second)
        assert job.state == "succeeded"
        assert alive(job) == []
    finally:
        second.stop()


def test_a_trainer_raising_names_the_exception_in_the_job_and_worker_message(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    env = {"FAKE_FAIL_TRAINER": "1", "FAKE_RAISE": "bad learning rate 7", "FAKE_STEPS": "6"}
    assert alice_api.post("/api/v1/jobs", {**SPEC, "pservers": 0, "env": env}, format="json").status_code == 201
    finished("fake", worker)
    shown = alice_api.get("/api/v1/jobs/fake").json()
    assert (shown["state"], shown["reason"], shown["exit_code"]) == ("failed", "TrainerFailed", 1), shown
    assert shown["message"] == "trainer 1 exited with code 1: ValueError: bad learning rate 7", shown
    rows = {w["name"]: w for w in alice_api.get("/api/v1/jobs/fake/workers").json()["results"]}
    assert rows["trainer-1"]["message"] == "trainer 1 exited with code 1: ValueError: bad learning rate 7"


def test_a_trainer_whose_script_is_missing_says_cant_open_file(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    spec = {**SPEC, "pservers": 0, "parallelism": 1, "entry": "python missing.py"}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    job = finished("fake", worker)
    assert (job.state, job.reason, job.exit_code) == ("failed", "TrainerFailed", 2), job.message
    assert "can't open file" in job.message and "missing.py" in job.message, job.message


def test_a_pserver_returning_0_early_fails_the_job_at_once_as_pserver_lost(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    spec = {**SPEC, "env": {"FAKE_STEPS": "600", "FAKE_PSERVER_EXIT": "0"}}
    alice_api.post("/api/v1/jobs", spec, format="json")
    job = finished("fake", worker)
    assert (job.state, job.reason, job.exit_code) == ("failed", "PserverLost", 0), job.message
    assert "exited with code 0: pserver returning early; the job cannot go on without it" in job.message
    # It returned 1 s after it started: the job failed at once, not after the trainers' 300 s wait for it.
    started = min(w.started_at for w in job.workers.filter(role="pserver") if w.started_at)
    assert job.finished_at is not None and (job.finished_at - started).total_seconds() < 10
    pserver = job.workers.get(role="pserver", index=int(job.message.split()[1]))
    assert (pserver.state, pserver.exit_code) == ("failed", 0)
    assert alive(job) == []
