"""Long polling on a job: the answer comes once its state leaves the one the client saw, within bounds."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db(transaction=True)


def running_job(owner: User, datacenter: Datacenter) -> Job:
    return Job.objects.create(
        owner=owner, datacenter=datacenter, name="fit", uid="fit-ab12c", spec={"parallelism": 1, "pservers": 0},
        state=JobState.RUNNING,
    )  # fmt: skip


def later(seconds: float, job: Job, state: JobState) -> threading.Thread:
    def move() -> None:
        time.sleep(seconds)
        Job.objects.filter(pk=job.pk).update(state=state)
        connection.close()

    thread = threading.Thread(target=move)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("query", "field"),
    [("state=running&wait=11", "wait"), ("state=running&wait=-1", "wait"), ("state=running&wait=soon", "wait"),
     ("state=bogus&wait=1", "state"), ("wait=1", "state")],
)  # fmt: skip
def test_bad_waits_are_refused_naming_the_field(
    alice_api: APIClient, alice: User, local_dc: Datacenter, query: str, field: str
) -> None:
    running_job(alice, local_dc)
    response = alice_api.get(f"/api/v1/jobs/fit?{query}")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_the_answer_comes_when_the_state_changes_not_when_the_wait_ends(
    alice_api: APIClient, alice: User, local_dc: Datacenter
) -> None:
    job = running_job(alice, local_dc)
    mover = later(0.5, job, JobState.SUCCEEDED)
    asked = time.monotonic()
    response = alice_api.get("/api/v1/jobs/fit?state=running&wait=10")
    mover.join()
    assert response.status_code == 200 and response.json()["state"] == "succeeded"
    assert time.monotonic() - asked < 8  # well before the 10 s the client allowed


def test_a_state_other_than_the_one_seen_answers_at_once(
    alice_api: APIClient, alice: User, local_dc: Datacenter
) -> None:
    running_job(alice, local_dc)
    asked = time.monotonic()
    assert alice_api.get("/api/v1/jobs/fit?state=pending&wait=10").json()["state"] == "running"
    assert time.monotonic() - asked < 8


def test_with_every_waiting_slot_taken_the_job_is_answered_at_once(
    alice_api: APIClient, alice: User, local_dc: Datacenter
) -> None:
    running_job(alice, local_dc)
    asked = time.monotonic()
    with override_settings(PADDLECLOUD_LONG_POLL_SLOTS=0):
        assert alice_api.get("/api/v1/jobs/fit?state=running&wait=10").json()["state"] == "running"
    assert time.monotonic() - asked < 8


def test_a_stranger_cannot_wait_on_anothers_job(bob_api: APIClient, alice: User, local_dc: Datacenter) -> None:
    running_job(alice, local_dc)
    assert bob_api.get("/api/v1/jobs/fit-ab12c?state=running&wait=10").status_code == 404
