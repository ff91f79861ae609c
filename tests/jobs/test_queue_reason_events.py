"""The queue's own reasons on the timeline: a job that is held, or waits for its image build, gets one event
when it enters that reason, and none on each later cycle that finds it still there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from images.models import BuildState, ImageBuild
from jobs import hooks, services
from jobs.models import EventKind, Job, JobEvent, Reason
from jobs.scheduling import cycle
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


def queued_events(job: Job) -> list[str]:
    return list(JobEvent.objects.filter(job=job, kind=EventKind.QUEUED).values_list("message", flat=True))


def test_holding_a_job_is_one_event_however_often_it_is_held_or_looked_at(
    local_dc: Datacenter, alice: User
) -> None:
    job = make_job(local_dc, alice, "held-one")
    services.hold(job)
    services.hold(job)  # an operator's second click is no change
    for _ in range(3):
        cycle.schedule(local_dc)  # the scheduler's cycles pass a held job by
    job.refresh_from_db()
    assert (job.held, job.reason) == (True, Reason.HELD)
    assert [m.split(":")[0] for m in queued_events(job)] == ["Held"]
    services.release(job)
    services.hold(job)  # held again after a release: it entered the reason again
    assert [m.split(":")[0] for m in queued_events(job)] == ["Held", "Held"]


def test_waiting_for_an_image_build_is_one_event_until_the_reason_changes(
    local_dc: Datacenter, alice: User
) -> None:
    build = ImageBuild.objects.create(
        uid="build-events01", owner=alice, datacenter=local_dc, package="/pfs/local/home/alice/pkg",
        base_image="python:3.12", image="registry.example.com/alice/pkg:1", registry="private",
    )  # fmt: skip
    job = make_job(local_dc, alice, "on-build")
    Job.objects.filter(pk=job.pk).update(spec={**job.spec, "build": build.uid})
    for _ in range(3):  # what each reconcile cycle's stuck-submission sweep asks again
        assert hooks.admit(job.pk) == hooks.Verdict.WAIT
    ImageBuild.objects.filter(pk=build.pk).update(state=BuildState.BUILDING)
    assert hooks.admit(job.pk) == hooks.Verdict.WAIT  # the message follows the build; still the same reason
    job.refresh_from_db()
    assert job.reason == Reason.IMAGE_BUILDING and "(building)" in job.message
    assert queued_events(job) == [f"ImageBuilding: waiting for image build {build.uid} (queued)"]
