"""The scheduler with real jobs, a real worker and its beat: capacity, gang admission, fairness, refusals, safety."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import close_old_connections
from django.db.models import Sum
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.follow.reconcile import STUCK_AFTER, stuck_submissions
from jobs.models import Job, JobState
from jobs.scheduling import cycle
from tests.jobs.conftest import put_package
from tests.wait import wait_for
from tests.workers import WorkerProcess

SHORT: dict[str, Any] = {"entry": "python train.py", "parallelism": 1, "cpu": "1", "memory": "256Mi"}
SHORT["package"] = "/pfs/local/home/alice/jobs/fake"
SHORT["env"] = {"FAKE_STEPS": "20", "FAKE_STEP_SECONDS": "0.1"}


@pytest.fixture
def held_cpu_samples(transactional_db: None, local_dc: Datacenter) -> Iterator[list[Decimal]]:
    """What admitted, unreleased jobs hold, sampled every 50 ms while the test runs."""
    samples: list[Decimal] = []
    stop = threading.Event()

    def sample() -> None:
        try:
            while not stop.wait(0.05):
                samples.append(cycle.holding(local_dc).aggregate(cpu=Sum("cpu_request"))["cpu"] or Decimal(0))
        finally:
            close_old_connections()

    sampler = threading.Thread(target=sample)
    sampler.start()
    yield samples
    stop.set()
    sampler.join(5)


def submit(api: APIClient, owner: str, name: str, **change: Any) -> None:
    body = {**SHORT, "jobname": name, "package": f"/pfs/local/home/{owner}/jobs/fake", **change}
    response = api.post("/api/v1/jobs", body, format="json")
    assert response.status_code == 201, response.json()


def all_released(names: list[str]) -> bool | None:
    jobs = Job.objects.filter(name__in=names, released=True, state=JobState.SUCCEEDED)
    return jobs.count() == len(names) or None


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_two_cores_run_two_jobs_at_a_time_and_bobs_job_passes_alices_burst(
    alice_api: APIClient, bob_api: APIClient, bob: User, local_dc: Datacenter, fake_package: Path,
    worker: WorkerProcess, held_cpu_samples: list[Decimal],
) -> None:  # fmt: skip
    local_dc.capacity_cpu = "2"
    local_dc.save()
    put_package(local_dc, bob, "fake", fake_package)
    alices = [f"a{i}" for i in range(6)]
    for name in alices:
        submit(alice_api, "alice", name)
    wait_for(lambda: Job.objects.filter(admitted_at__isnull=False).count() >= 2 or None, "alice's first two", 60,
             watch=worker)  # fmt: skip
    submit(bob_api, "bob", "b0")
    wait_for(lambda: all_released([*alices, "b0"]), "every job to succeed", 240, watch=worker)
    assert max(held_cpu_samples) <= 2, "the scheduler let more than the capacity run at once"
    order = list(Job.objects.order_by("admitted_at").values_list("name", flat=True))
    assert order.index("b0") < order.index("a2"), order  # bob waited behind at most alice's first two
    for job in Job.objects.all():  # nothing of a job started before the scheduler admitted it
        assert job.admitted_at is not None
        started = [when for when in job.workers.values_list("started_at", flat=True) if when is not None]
        assert started and min(started) >= job.admitted_at


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_ps_job_waits_whole_and_starts_whole(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, worker: WorkerProcess,
    held_cpu_samples: list[Decimal],
) -> None:  # fmt: skip
    """2 pservers + 2 trainers at half a core each fill 2 cores: none of them starts while a 1-core job runs."""
    local_dc.capacity_cpu = "2"
    local_dc.save()
    submit(alice_api, "alice", "first", env={"FAKE_STEPS": "40", "FAKE_STEP_SECONDS": "0.1"})
    wait_for(lambda: Job.objects.filter(name="first", state=JobState.RUNNING).first(), "first running", 60,
             watch=worker)  # fmt: skip
    submit(alice_api, "alice", "gang", pservers=2, parallelism=2, cpu="0.5", pscpu="0.5", psmemory="256Mi")

    def queued_for_capacity() -> Job | None:
        return Job.objects.filter(name="gang", state=JobState.QUEUED, reason="WaitingForCapacity").first()

    gang = wait_for(queued_for_capacity, "the gang job to wait for capacity", 30, watch=worker)
    assert isinstance(gang, Job) and "cpu" in gang.message
    assert not gang.workers.exists()
    wait_for(lambda: all_released(["first", "gang"]), "both jobs to succeed", 180, watch=worker)
    first = Job.objects.get(name="first")
    gang.refresh_from_db()
    assert first.finished_at is not None and gang.admitted_at is not None and gang.admitted_at >= first.finished_at
    started = list(gang.workers.values_list("started_at", flat=True))
    assert len(started) == 4 and all(started)  # every pserver and trainer ran
    assert max(held_cpu_samples) <= 2


@pytest.mark.django_db
def test_a_job_bigger_than_the_capacity_is_refused_at_submit(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path
) -> None:
    local_dc.capacity_cpu, local_dc.capacity_gpu = "2", 0
    local_dc.save()
    response = alice_api.post("/api/v1/jobs", {**SHORT, "jobname": "big", "parallelism": 3}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "capacity", "code": "invalid",
         "message": "cpu: the job needs 3 cores but local has 2, so it could never start"},
    ]  # fmt: skip
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_users_waiting_jobs_are_bounded(alice_api: APIClient, local_dc: Datacenter, fake_package: Path) -> None:
    local_dc.max_queued_jobs = 2
    local_dc.save()
    for name in ("q0", "q1"):
        assert alice_api.post("/api/v1/jobs", {**SHORT, "jobname": name}, format="json").status_code == 201
    response = alice_api.post("/api/v1/jobs", {**SHORT, "jobname": "q2"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "queue"
    assert "2 jobs waiting in local" in response.json()["errors"][0]["message"]


@pytest.mark.django_db(transaction=True)
def test_cycles_at_once_admit_each_job_once_and_never_past_the_capacity(
    alice: User, bob: User, local_dc: Datacenter
) -> None:
    local_dc.capacity_cpu = "10"
    local_dc.save()
    for i in range(40):
        Job.objects.create(owner=alice if i % 2 else bob, datacenter=local_dc, name=f"j{i}", uid=f"j{i}-x",
                           spec={}, cpu_request=1)  # fmt: skip
    admitted: list[int] = []
    lock = threading.Lock()

    def run() -> None:
        try:
            for _ in range(5):
                ids = cycle.schedule(Datacenter.objects.get(pk=local_dc.pk)) or []
                with lock:
                    admitted.extend(ids)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(admitted) == len(set(admitted)) == 10
    assert Job.objects.filter(admitted_at__isnull=False).count() == 10
    assert Job.objects.filter(admitted_at__isnull=False, owner=alice).count() == 5  # fair: half each


@pytest.mark.django_db
def test_an_admitted_job_whose_start_was_lost_is_sent_again_and_a_waiting_one_is_not(
    alice: User, local_dc: Datacenter
) -> None:
    """A worker that died between admitting a job and sending its start: the reconciler's sweep sends it."""
    long_ago = timezone.now() - STUCK_AFTER * 2
    admitted = Job.objects.create(owner=alice, datacenter=local_dc, name="a", uid="a-1", spec={}, admitted_at=long_ago)
    waiting = Job.objects.create(owner=alice, datacenter=local_dc, name="w", uid="w-1", spec={})
    Job.objects.filter(pk__in=[admitted.pk, waiting.pk]).update(updated_at=long_ago)
    assert stuck_submissions() == [admitted.pk]
