"""Preemption with real processes: a higher-priority job stops a lower one, which waits and runs again (attempt + 1)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from datacenters.models import Datacenter, TeamQuota
from jobs.models import Job, JobState, UsageRecord
from jobs.scheduling.policy import victims
from jobs.scheduling.shapes import Amount, Bound, Candidate, Running, World
from tests.jobs.conftest import put_package
from tests.wait import wait_for
from tests.workers import WorkerProcess

ENTRY = 'echo "attempt=${PADDLECLOUD_ATTEMPT:-} preempted=${PADDLECLOUD_PREEMPTED:-}"; python train.py'


def spec(name: str, owner: str, **change: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"jobname": name, "entry": ENTRY, "parallelism": 1, "cpu": "2", "memory": "256Mi"}
    body["package"] = f"/pfs/local/home/{owner}/jobs/fake"
    return {**body, **change}


def test_victims_are_the_fewest_lowest_and_newest_that_make_room() -> None:
    world = World(capacity=Bound(4.0, None, None), in_use=Amount(4.0, 0, 0))
    waiting = Candidate(9, 1, 1000, 0.0, Amount(2.0, 0, 0))
    running = [
        Running(1, 0, admitted=10.0, request=Amount(1.0, 0, 0), preemptible=True),
        Running(2, 0, admitted=20.0, request=Amount(1.0, 0, 0), preemptible=True),
        Running(3, 100, admitted=30.0, request=Amount(2.0, 0, 0), preemptible=True),
        Running(4, 0, admitted=40.0, request=Amount(1.0, 0, 0), preemptible=False),  # opted out
    ]
    assert victims(waiting, running, world) == [2, 1]  # low before normal; the newest low first
    assert victims(Candidate(8, 1, 50, 0.0, Amount(2.0, 0, 0)), running, world) == [2, 1]
    assert victims(Candidate(7, 1, 0, 0.0, Amount(2.0, 0, 0)), running, world) == []  # nothing of lower priority
    too_big = Candidate(6, 1, 1000, 0.0, Amount(5.0, 0, 0))
    assert victims(too_big, running, world) == []  # stopping all it may stop would not be enough: stop none


def test_of_two_alike_the_victim_is_the_one_that_loses_the_least_work_since_its_checkpoint() -> None:
    """Checkpoint-aware preemption: two low jobs, the older one saved a second ago, the newer one never: stopping
    the older loses 1 s of work, the newer all 500 s it ran. Priority still comes first."""
    now = 1000.0
    world = World(capacity=Bound(2.0, None, None), in_use=Amount(2.0, 0, 0))
    waiting = Candidate(9, 1, 1000, 0.0, Amount(1.0, 0, 0))
    saved_just_now = Running(1, 0, admitted=100.0, request=Amount(1.0, 0, 0), preemptible=True, saved=999.0)
    never_saved = Running(2, 0, admitted=500.0, request=Amount(1.0, 0, 0), preemptible=True)
    assert victims(waiting, [saved_just_now, never_saved], world, now=now) == [1]
    assert saved_just_now.at_risk(now) == 1.0 and never_saved.at_risk(now) == 500.0
    older_attempt = Running(3, 0, admitted=900.0, request=Amount(1.0, 0, 0), preemptible=True, saved=800.0)
    assert older_attempt.at_risk(now) == 100.0  # a checkpoint from before its admission: its run since counts
    normal = Running(4, 100, admitted=10.0, request=Amount(1.0, 0, 0), preemptible=True, saved=999.9)
    assert victims(waiting, [normal, never_saved], world, now=now) == [2]  # the lower priority, whatever it loses


@pytest.fixture
def preempting_dc(local_dc: Datacenter, bob: User, fake_package: Path) -> Datacenter:
    local_dc.capacity_cpu = "2"
    local_dc.preemption_delay = 0
    local_dc.preemption_grace = 3
    local_dc.save()
    put_package(local_dc, bob, "fake", fake_package)
    return local_dc


def running(name: str) -> Job | None:
    return Job.objects.filter(name=name, state=JobState.RUNNING).first()


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_high_job_preempts_a_low_one_which_is_killed_after_the_grace_and_runs_again(
    alice_api: APIClient, carol_api: APIClient, carol: User, preempting_dc: Datacenter, worker: WorkerProcess
) -> None:
    put_package(preempting_dc, carol, "fake", Path(__file__).parent / "fake_package")
    # The low job ignores SIGTERM (as a busy Paddle process may): only the SIGKILL after the grace ends it.
    env = {"FAKE_IGNORE_TERM": "1", "FAKE_STEPS": "40", "FAKE_STEP_SECONDS": "0.1"}
    created = alice_api.post("/api/v1/jobs", spec("low", "alice", priority="low", env=env), format="json")
    assert created.status_code == 201, created.json()
    wait_for(lambda: running("low"), "the low job running", 60, watch=worker)
    high = carol_api.post("/api/v1/jobs", spec("urgent", "carol", priority="high", cpu="1"), format="json")
    assert high.status_code == 201, high.json()

    preempted = wait_for(lambda: Job.objects.filter(name="low", preempted_at__isnull=False).first(), "preemption",
                         30, watch=worker)  # fmt: skip
    assert isinstance(preempted, Job) and preempted.reason == "Preempted" and preempted.state == JobState.QUEUED
    began = time.monotonic()
    wait_for(lambda: Job.objects.filter(name="low", attempt=2).first(), "the low job queued again", 60, watch=worker)
    assert time.monotonic() - began >= 1.5  # it ignored SIGTERM: the SIGKILL came only after the 3 s grace

    def done(name: str) -> Job | None:
        return Job.objects.filter(name=name, state=JobState.SUCCEEDED, released=True).first()

    urgent = wait_for(lambda: done("urgent"), "the high job to succeed", 90, watch=worker)
    low = wait_for(lambda: done("low"), "the low job to succeed on its second attempt", 120, watch=worker)
    assert isinstance(urgent, Job) and isinstance(low, Job)
    assert low.attempt == 2 and low.admitted_at is not None and urgent.finished_at is not None
    assert low.admitted_at >= urgent.finished_at  # it waited for the room the high job took
    text = alice_api.get("/api/v1/jobs/low/logs?worker=trainer-0").json()["text"]
    assert "attempt=2 preempted=1" in text, text
    attempts = sorted(UsageRecord.objects.filter(job_uid=low.uid).values_list("attempt", flat=True))
    assert attempts == [1, 2]  # both runs are in the ledger


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_that_opted_out_is_not_preempted(
    alice_api: APIClient, carol_api: APIClient, carol: User, preempting_dc: Datacenter, worker: WorkerProcess
) -> None:
    put_package(preempting_dc, carol, "fake", Path(__file__).parent / "fake_package")
    refused = alice_api.post("/api/v1/jobs", spec("low", "alice", priority="low", no_preempt=True), format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "no_preempt"
    env = {"FAKE_STEPS": "60", "FAKE_STEP_SECONDS": "0.1"}
    kept = alice_api.post("/api/v1/jobs", spec("kept", "alice", no_preempt=True, env=env), format="json")
    assert kept.status_code == 201, kept.json()
    wait_for(lambda: running("kept"), "the job running", 60, watch=worker)
    assert carol_api.post("/api/v1/jobs", spec("urgent", "carol", priority="high"), format="json").status_code == 201
    wait_for(lambda: Job.objects.filter(name="urgent", reason="WaitingForCapacity").first(), "the high job waiting",
             30, watch=worker)  # fmt: skip
    time.sleep(4)  # two scheduling cycles past the (zero) preemption delay
    assert running("kept") is not None and not Job.objects.filter(preempted_at__isnull=False).exists()


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_team_borrows_idle_room_and_gives_it_back_when_the_lender_needs_it(
    alice_api: APIClient, bob_api: APIClient, alice: User, bob: User, preempting_dc: Datacenter,
    worker: WorkerProcess,
) -> None:  # fmt: skip
    for name, member in (("vision", alice), ("nlp", bob)):
        group = Group.objects.create(name=name)
        member.groups.add(group)
        TeamQuota.objects.create(group=group, datacenter=preempting_dc, cpu="1", memory="4Gi")
    env = {"FAKE_STEPS": "60", "FAKE_STEP_SECONDS": "0.1"}
    for name in ("own", "borrowed"):
        created = alice_api.post("/api/v1/jobs", spec(name, "alice", cpu="1", env=env), format="json")
        assert created.status_code == 201, created.json()
    wait_for(lambda: running("own") and running("borrowed"), "both of vision's jobs running", 60, watch=worker)
    assert Job.objects.get(name="borrowed").borrowing and not Job.objects.get(name="own").borrowing
    assert bob_api.post("/api/v1/jobs", spec("lender", "bob", cpu="1"), format="json").status_code == 201
    lender = wait_for(lambda: Job.objects.filter(name="lender", state=JobState.SUCCEEDED).first(),
                      "nlp's job to take its room back and succeed", 90, watch=worker)  # fmt: skip
    assert isinstance(lender, Job) and not lender.borrowing
    borrowed = wait_for(lambda: Job.objects.filter(name="borrowed", state=JobState.SUCCEEDED).first(),
                        "the borrowing job to run again and succeed", 120, watch=worker)  # fmt: skip
    assert isinstance(borrowed, Job) and borrowed.attempt == 2
    own = Job.objects.get(name="own")
    assert own.attempt == 1  # what ran within vision's own quota was never touched
