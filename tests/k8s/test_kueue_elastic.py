"""Elastic collective jobs on an `admission: kueue` datacenter (the real control plane running Kueue and JobSet; kwok
plays the kubelet): the gate lets an elastic job through with the trainers that fit its owner's quota now, Kueue
admits that JobSet whole, once room frees and nothing waits the job grows by a restart with more trainers, and under a
higher priority it runs again with fewer (jobs/scheduling/elastic.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as k8s
from paddlecloud.contract.jobenv import env_name

from datacenters.models import Datacenter
from jobs.follow.tasks import submit_job
from jobs.models import EventKind, Job, JobState, PriorityClass, Reason
from jobs.scheduling import cycle
from tests.k8s.engine_helpers import FATE, drive, job_in, kill, new_job
from tests.k8s.test_kueue_priorities import jobsets_of

pytestmark = [pytest.mark.django_db, pytest.mark.kueue]

GI = 2**30
HANG = {FATE: "hang"}
CLASSES = {"normal": 100, "high": 1000}


@pytest.fixture(autouse=True)
def classes(db: None) -> None:
    for name, value in CLASSES.items():
        PriorityClass.objects.update_or_create(name=name, defaults={"value": value, "open_to_all": True})


def queued(
    dc: Datacenter, user: User, name: str, trainers: int, fewest: int = 0, priority: str = "normal",
    fate: dict[str, str] = HANG, **extra: Any,
) -> Job:
    """A waiting collective job of `trainers` one-core trainers (elastic down to `fewest`), as a submit leaves it;
    its trainers' `fate` (kwok), more of the spec in `extra`."""
    spec = {"jobname": name, "parallelism": trainers, "pservers": 0, "cpu": "1", "memory": "1Gi", **extra}
    job = new_job(dc, user, {**spec, **({"min_parallelism": fewest} if fewest else {})}, trainer_annotations=fate)
    elastic = {"min_trainers": fewest, "max_trainers": trainers} if fewest else {}
    Job.objects.filter(pk=job.pk).update(state=JobState.QUEUED, cpu_request=trainers, memory_request=trainers * GI,
                                         gpu_request=0, priority_class=priority, priority=CLASSES[priority],
                                         **elastic)  # fmt: skip
    job.refresh_from_db()
    return job


def through_the_gate(dc: Datacenter, *jobs: Job, fate: dict[str, str] = HANG) -> None:
    """One cycle of the gate lets them through to Kueue; each is started as a JobSet (what submit_job does), its
    trainers' `fate` set again (a requeue empties the engine's test hook)."""
    assert sorted(cycle.schedule(dc) or []) == sorted(job.pk for job in jobs)
    for job in jobs:
        hook = {"pod_annotations": fate}
        Job.objects.filter(pk=job.pk).update(engine_data={**Job.objects.get(pk=job.pk).engine_data, **hook})
        submit_job.apply(args=(job.pk,))


def running_with(job: Job, trainers: int) -> Job | None:
    found = job_in(job, JobState.RUNNING)
    return found if found and found.trainers == trainers and found.trainers_running == trainers else None


def trainers_of(kueue_api: k8s.ApiClient, job: Job) -> tuple[int, str]:
    """Its JobSet's trainer pods and the number of trainers their launcher is told (its PADDLE_TRAINERS_NUM)."""
    (body,) = jobsets_of(kueue_api, job)
    (replicated,) = body["spec"]["replicatedJobs"]
    (container,) = replicated["template"]["spec"]["template"]["spec"]["containers"]
    env: dict[str, Any] = {e["name"]: e.get("value") for e in container["env"]}
    return int(replicated["template"]["spec"]["parallelism"]), env[env_name("trainers")]


def test_an_elastic_job_goes_through_to_kueue_with_what_fits_grows_when_room_frees_and_shrinks_under_a_high_job(
    kueue_dc: Datacenter, alice: User, kueue_api: k8s.ApiClient
) -> None:
    kueue_dc.elastic_grow_after = 0
    kueue_dc.save()

    def requeued(attempt: int) -> Job | None:
        found = job_in(grow, JobState.QUEUED)
        return found if found is not None and found.attempt == attempt else None

    busy = queued(kueue_dc, alice, "busy", trainers=2)
    through_the_gate(kueue_dc, busy)
    drive(kueue_dc, lambda: running_with(busy, 2), "the fixed-size job running")

    # Alice's quota is 4 cores and 2 are taken: her 1-to-4-trainer job goes through to Kueue with 2.
    grow = queued(kueue_dc, alice, "grow", trainers=4, fewest=1)
    through_the_gate(kueue_dc, grow)
    grow = drive(kueue_dc, lambda: running_with(grow, 2), "the elastic job running with 2 of its 4 trainers")
    assert (grow.trainers_now, grow.cpu_request) == (2, Decimal(2))
    assert trainers_of(kueue_api, grow) == (2, "2")
    assert grow.events.filter(kind=EventKind.ADMITTED, message__contains="with 2 trainers").exists()

    # The other job ends: nothing waits, so the elastic job restarts with all 4 trainers (from its checkpoint).
    kill(busy)
    assert cycle.schedule(kueue_dc) == []  # the cycle that marks it to grow (Resizing)
    grow.refresh_from_db()
    assert (grow.state, grow.reason) == (JobState.QUEUED, Reason.RESIZING), grow.message
    drive(kueue_dc, lambda: requeued(2), "requeued")
    through_the_gate(kueue_dc, grow)
    grow = drive(kueue_dc, lambda: running_with(grow, 4), "the elastic job running again with 4 trainers")
    assert trainers_of(kueue_api, grow) == (4, "4") and grow.attempt == 2

    # A high job of 2 cores: Kueue stops the elastic job whole; it waits again at its full size and the gate lets
    # it through with the 2 trainers that fit beside the high job.
    high = queued(kueue_dc, alice, "high", trainers=2, priority="high")
    through_the_gate(kueue_dc, high)
    grow = drive(kueue_dc, lambda: requeued(3), "the elastic job preempted by Kueue and requeued")
    through_the_gate(kueue_dc, grow)
    grow = drive(kueue_dc, lambda: running_with(grow, 2), "the elastic job running with 2 trainers beside the high job")
    drive(kueue_dc, lambda: running_with(high, 2), "the high job running")
    assert trainers_of(kueue_api, grow) == (2, "2")
    for job in (grow, high):
        kill(job)
