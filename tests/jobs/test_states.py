"""The state machine's timeline: a job that ended between two polls still has a start (database, no engine)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job, JobState, Role, Worker
from jobs.states import transition


@pytest.fixture
def pending(local_dc: Datacenter, alice: User) -> Job:
    spec = {"parallelism": 2, "pservers": 0}
    return Job.objects.create(owner=alice, datacenter=local_dc, name="quick", uid="quick-ab12c", spec=spec,
                              state=JobState.PENDING)  # fmt: skip


def test_a_job_never_seen_running_starts_when_its_first_worker_did(pending: Job) -> None:
    first = timezone.now() - timedelta(seconds=7)
    Worker.objects.create(job=pending, role=Role.TRAINER, index=0, state="succeeded", started_at=first)
    Worker.objects.create(job=pending, role=Role.TRAINER, index=1, state="succeeded", started_at=first + timedelta(1))
    Worker.objects.create(job=pending, role=Role.TRAINER, index=2, state="succeeded")  # never recorded
    assert transition(pending.pk, JobState.SUCCEEDED)
    pending.refresh_from_db()
    assert pending.started_at == first and pending.finished_at and pending.finished_at > first


def test_without_worker_times_the_start_is_the_end_and_a_known_start_stays(pending: Job) -> None:
    assert transition(pending.pk, JobState.SUCCEEDED)
    pending.refresh_from_db()
    assert pending.started_at == pending.finished_at
    ran = Job.objects.create(owner=pending.owner, datacenter=pending.datacenter, name="ran", uid="ran-ab12c",
                             spec=pending.spec, state=JobState.PENDING)  # fmt: skip
    assert transition(ran.pk, JobState.RUNNING)
    started = Job.objects.get(pk=ran.pk).started_at
    assert transition(ran.pk, JobState.SUCCEEDED)
    assert Job.objects.get(pk=ran.pk).started_at == started
