"""Tasks are idempotent: run twice, nothing doubles; a killed job's processes all go."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.follow import tasks
from jobs.follow.reconcile import stuck_submissions
from jobs.models import Job, Worker
from jobs.scheduling import cycle
from tests.jobs.conftest import alive

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 1, "env": {"FAKE_STEPS": "600"}}


def test_submit_job_twice_starts_each_process_once(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path
) -> None:
    created = alice_api.post("/api/v1/jobs", SPEC, format="json").json()
    job = Job.objects.get(name="fake")
    assert cycle.schedule(local_dc) == [job.pk]  # what the scheduler's cycle does before it sends submit_job
    try:
        tasks.submit_job.run(job.pk)
        tasks.submit_job.run(job.pk)
        job.refresh_from_db()
        assert job.state == "pending"
        assert Worker.objects.filter(job=job).count() == 3
        # 3 launchers, the job network's holder, and their 4 supervisors: nothing twice.
        assert len(set(alive(job))) == 8
        assert list(job.engine_data).count("network") == 1
        tasks.reconcile.run()
        tasks.reconcile.run()
        assert Job.objects.get(pk=job.pk).state == "running"
    finally:
        alice_api.delete("/api/v1/jobs/fake")
    assert created["state"] == "queued"
    deadline = time.monotonic() + 20
    # kill_job takes one look and queues the next; no worker runs here, so take each look in turn.
    while (alive(job) or not Job.objects.get(pk=job.pk).released) and time.monotonic() < deadline:
        tasks.kill_job.run(job.pk)
        time.sleep(0.2)
    assert alive(job) == []
    assert Job.objects.get(pk=job.pk).released


def test_submit_of_a_killed_job_does_nothing(alice_api: APIClient, local_dc: Datacenter, fake_package: Path) -> None:
    alice_api.post("/api/v1/jobs", SPEC, format="json")
    alice_api.delete("/api/v1/jobs/fake")
    job = Job.objects.get(name="fake")
    tasks.submit_job.run(job.pk)
    job.refresh_from_db()
    assert job.state == "killed" and job.engine_data == {} and not Worker.objects.exists()


def test_a_job_whose_package_vanished_fails_with_the_reason(
    alice_api: APIClient, alice: User, local_dc: Datacenter, fake_package: Path
) -> None:
    alice_api.post("/api/v1/jobs", SPEC, format="json")
    for path in sorted(fake_package.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    fake_package.rmdir()
    job = Job.objects.get(name="fake")
    cycle.schedule(local_dc)
    tasks.submit_job.run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.reason) == ("failed", "SubmitFailed")
    assert "does not exist" in job.message


def test_logs_api_checks_the_worker_and_tail(alice_api: APIClient, local_dc: Datacenter, fake_package: Path) -> None:
    alice_api.post("/api/v1/jobs", SPEC, format="json")
    bad = alice_api.get("/api/v1/jobs/fake/logs?worker=trainer-7")
    assert bad.status_code == 400
    assert "'trainer-7' is not a worker of fake; it has pserver-0, trainer-0, trainer-1" in bad.json()["detail"]
    assert alice_api.get("/api/v1/jobs/fake/logs?worker=trainer-0&tail=x").status_code == 400
    empty = alice_api.get("/api/v1/jobs/fake/logs?worker=pserver-0&tail=5").json()
    assert (empty["text"], empty["complete"]) == ("", False)


def test_a_lost_submission_is_picked_up_again_once(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path
) -> None:
    alice_api.post("/api/v1/jobs", SPEC, format="json")
    job = Job.objects.get(name="fake")
    assert stuck_submissions() == []  # waiting in the queue: the scheduler, not the sweep, starts it
    cycle.schedule(local_dc)
    assert stuck_submissions() == []  # admitted just now: its own submit_job is still on its way
    Job.objects.filter(pk=job.pk).update(updated_at=timezone.now() - timedelta(minutes=1))
    assert stuck_submissions() == [job.pk]
    assert stuck_submissions() == []  # touched: not enqueued again while that submission runs
