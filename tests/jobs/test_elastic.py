"""Elastic collective jobs (spec min_parallelism, jobs/scheduling/elastic.py): admitted with the most trainers that fit,
holding only theirs; grown when room frees and nothing waits for it; waiting again at their full size."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import EventKind, Job, JobState, Reason
from jobs.scheduling import cycle, elastic, forecast, policy, shapes
from tests.jobs.conftest import put_package
from tests.jobs.test_queue_api import make_job


def test_the_policy_admits_an_elastic_job_with_the_most_trainers_that_fit_and_holds_its_fewest_when_none_do() -> None:
    world = shapes.World(capacity=shapes.Bound(3.0, None, None), in_use=shapes.Amount(1.0, 0, 0))
    four = shapes.Candidate(1, owner_id=1, priority=100, created=1.0, request=shapes.Amount(4.0, 0, 0), trainers=4,
                            min_trainers=1)  # fmt: skip
    result = policy.plan([four], world)
    assert (result.admit, result.sizes, world.in_use.cpu) == ([1], {1: 2}, 3.0)  # 2 of 4 trainers fit
    full = shapes.World(capacity=shapes.Bound(3.0, None, None), in_use=shapes.Amount(3.0, 0, 0))
    three = shapes.Candidate(2, owner_id=2, priority=100, created=2.0, request=shapes.Amount(1.0, 0, 0))
    result = policy.plan([shapes.Candidate(1, 1, 200, 1.0, shapes.Amount(4.0, 0, 0), trainers=4, min_trainers=1),
                          three], full)  # fmt: skip
    assert result.admit == [] and result.waiting[1][0] == shapes.WAITING_FOR_CAPACITY
    assert result.waiting[2][0] == shapes.WAITING_FOR_CAPACITY  # the elastic job's fewest (1 core) is held for it


def test_kueue_s_gate_sizes_an_elastic_job_to_what_fits_now_and_to_its_fewest_where_none_fit() -> None:
    world = shapes.World(capacity=shapes.Bound(3.0, None, None), in_use=shapes.Amount(1.0, 0, 0))
    four = shapes.Candidate(1, owner_id=1, priority=100, created=1.0, request=shapes.Amount(4.0, 0, 0), trainers=4,
                            min_trainers=1)  # fmt: skip
    fixed = shapes.Candidate(2, owner_id=2, priority=100, created=2.0, request=shapes.Amount(2.0, 0, 0))
    three = shapes.Candidate(3, owner_id=2, priority=100, created=3.0, request=shapes.Amount(3.0, 0, 0), trainers=3,
                             min_trainers=2)  # fmt: skip
    # 2 of 4 fit; the fixed-size job and the 2-to-3 one then find no room: Kueue holds them, the elastic at its fewest.
    assert elastic.kueue_sizes([four, fixed, three], world) == {1: 2, 3: 2}


@pytest.fixture
def two_cores(local_dc: Datacenter) -> Datacenter:
    local_dc.capacity_cpu, local_dc.capacity_memory, local_dc.capacity_gpu = "2", "16Gi", 0
    local_dc.save()
    return local_dc


def test_an_elastic_job_starts_small_grows_when_room_frees_and_waits_again_at_its_full_size(
    two_cores: Datacenter, alice: User, bob: User, alice_api: APIClient
) -> None:
    put_package(two_cores, alice, "grow", Path(__file__).parent / "fake_package")
    busy = make_job(two_cores, bob, "busy")
    assert cycle.schedule(two_cores) == [busy.pk]
    Job.objects.filter(pk=busy.pk).update(state=JobState.RUNNING)
    spec = {"jobname": "grow", "entry": "python train.py", "parallelism": 2, "min_parallelism": 1, "cpu": "1",
            "memory": "1Gi"}  # fmt: skip
    created = alice_api.post("/api/v1/jobs", spec, format="json")
    assert created.status_code == 201, created.json()
    job = Job.objects.get(name="grow")
    assert (job.min_trainers, job.max_trainers, job.cpu_request) == (1, 2, Decimal(2))
    assert job.pk in (cycle.schedule(two_cores) or [job.pk])  # the submit's own cycle may have admitted it
    job.refresh_from_db()
    assert (job.trainers_now, job.trainers, job.cpu_request, job.memory_request) == (1, 1, Decimal(1), 2**30)
    assert job.events.filter(kind=EventKind.ADMITTED, message__contains="with 1 trainers").exists()

    # Room frees, but it ran for less than the datacenter's elastic_grow_after (60 s): it does not grow yet.
    Job.objects.filter(pk=busy.pk).update(state=JobState.SUCCEEDED, released=True)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    cycle.schedule(two_cores)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    Job.objects.filter(pk=job.pk).update(admitted_at=timezone.now() - timedelta(seconds=61))
    cycle.schedule(two_cores)
    job.refresh_from_db()
    assert (job.state, job.reason) == (JobState.QUEUED, Reason.RESIZING) and job.preempted_at is not None
    assert job.message.startswith("growing from 1 to 2 trainers"), job.message
    # Stopped and queued again (reconcile.requeue_preempted): at its full size, to be admitted with what fits then.
    assert elastic.full_size(job) == {"trainers_now": 0, "cpu_request": Decimal(2), "memory_request": 2 * 2**30,
                                      "gpu_request": 0}  # fmt: skip


def test_an_elastic_job_does_not_grow_into_room_another_job_waits_for(two_cores: Datacenter, alice: User,
                                                                      bob: User) -> None:  # fmt: skip
    grow = make_job(two_cores, alice, "grow", min_trainers=1, max_trainers=2, trainers_now=1, state=JobState.RUNNING,
                    admitted_at=timezone.now() - timedelta(hours=1))  # fmt: skip
    make_job(two_cores, bob, "big")  # waits for both cores: the free one is kept for it
    Job.objects.filter(name="big").update(cpu_request=2)
    cycle.schedule(two_cores)
    assert Job.objects.get(pk=grow.pk).state == JobState.RUNNING


def test_the_forecast_starts_an_elastic_job_in_the_room_its_fewest_trainers_need(
    two_cores: Datacenter, alice: User, bob: User
) -> None:
    make_job(two_cores, bob, "busy", state=JobState.RUNNING, admitted_at=timezone.now(), started_at=timezone.now())
    Job.objects.filter(name="busy").update(cpu_request=Decimal("1.5"))
    grow = make_job(two_cores, alice, "grow", min_trainers=1, max_trainers=2)  # 2 x 0.5 cores; 0.5 are free
    Job.objects.filter(pk=grow.pk).update(cpu_request=1)
    place = forecast.places(two_cores)[grow.pk]
    assert place.position == 1 and place.estimated_start is not None  # it starts now, with 1 trainer
    assert abs((place.estimated_start - timezone.now()).total_seconds()) < 5
