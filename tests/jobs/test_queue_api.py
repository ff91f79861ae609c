"""The queue API: positions in the scheduler's order, others' jobs unnamed, estimates, priorities, operators' verbs.

Jobs are written directly (they never start: no worker runs here) and the real scheduling cycle
(jobs.scheduling.cycle.schedule) admits what fits, so the positions are the scheduler's own.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone
from paddlecloud.contract.units import parse_time
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import EventKind, Job, JobState, PriorityClass
from jobs.scheduling import cycle

GI = 1024**3
CLASSES = {"low": (0, True), "normal": (100, True), "high": (1000, False)}


@pytest.fixture
def classes(db: None) -> None:
    """The three starting classes (the migration seeds them; a transactional test's flush removes them)."""
    for name, (value, open_to_all) in CLASSES.items():
        PriorityClass.objects.get_or_create(name=name, defaults={"value": value, "open_to_all": open_to_all})


@pytest.fixture
def one_core(local_dc: Datacenter, classes: None) -> Datacenter:
    """A datacenter where one 1-core job runs at a time."""
    local_dc.capacity_cpu, local_dc.capacity_memory, local_dc.capacity_gpu = "1", "8Gi", 0
    local_dc.save()
    return local_dc


def make_job(dc: Datacenter, owner: User, name: str, priority: str = "normal", **fields: Any) -> Job:
    spec = {"jobname": name, "entry": "python train.py", "parallelism": 1, "pservers": 0, "priority": priority}
    job = Job.objects.create(
        owner=owner, datacenter=dc, name=name, uid=f"{name}-{owner.username}", spec=spec, cpu_request=Decimal(1),
        memory_request=GI, gpu_request=0, priority_class=priority, priority=CLASSES[priority][0], **fields,
    )  # fmt: skip
    return job


@pytest.fixture
def queue(one_core: Datacenter, alice: User, bob: User, carol: User) -> dict[str, Job]:
    """alice runs `busy` (admitted); then alice a1, a2 and a-low, bob b1 and carol's high job wait."""
    jobs = {"busy": make_job(one_core, alice, "busy")}
    assert cycle.schedule(one_core) == [jobs["busy"].pk]
    jobs["a1"] = make_job(one_core, alice, "a1")
    jobs["a2"] = make_job(one_core, alice, "a2")
    jobs["a-low"] = make_job(one_core, alice, "a-low", priority="low")
    jobs["b1"] = make_job(one_core, bob, "b1")
    jobs["urgent"] = make_job(one_core, carol, "urgent", priority="high")
    assert cycle.schedule(one_core) == []  # the core is taken: everyone waits, each with a reason
    return jobs


def rows(api: APIClient, datacenter: str = "local") -> list[dict[str, Any]]:
    answer = api.get(f"/api/v1/queue?datacenter={datacenter}")
    assert answer.status_code == 200, answer.json()
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


def test_the_queue_is_in_priority_order_then_fair_share(queue: dict[str, Job], carol_api: APIClient) -> None:
    answer = rows(carol_api)
    # high first; among normal, bob (who holds nothing) before alice (who runs `busy`); then by age; low last.
    assert [r["job"] for r in answer] == ["urgent", "b1", "a1", "a2", "a-low"]
    assert [r["position"] for r in answer] == [1, 2, 3, 4, 5]
    assert [r["priority"] for r in answer] == ["high", "normal", "normal", "normal", "low"]
    assert {r["reason"] for r in answer} == {"WaitingForCapacity"}
    assert answer[0]["requests"] == {"cpu": 1.0, "memory": GI, "gpu": 0}
    assert all(r["waited"] >= 0 for r in answer)


def test_other_users_jobs_are_shown_without_their_names(queue: dict[str, Job], alice_api: APIClient) -> None:
    answer = rows(alice_api)
    assert [r["job"] for r in answer] == [None, None, "a1", "a2", "a-low"]
    assert [r["owner"] for r in answer] == ["another user", "another user", "alice", "alice", "alice"]
    assert answer[0]["uid"] is None and answer[2]["uid"] == "a1-alice"
    text = alice_api.get("/api/v1/queue?datacenter=local").content.decode()
    assert "urgent" not in text and "b1" not in text and "carol" not in text and "bob" not in text


def test_a_datacenter_the_user_may_not_use_is_a_400_naming_it(queue: dict[str, Job], bob_api: APIClient) -> None:
    private = Datacenter.objects.create(name="private", storage_root="/srv/private", all_users=False)
    for name in ("private", "nope", "x" * 200):
        answer = bob_api.get(f"/api/v1/queue?datacenter={name}")
        assert answer.status_code == 400, answer.json()
        assert answer.json()["errors"][0]["field"] == "datacenter"
    assert private.name not in bob_api.get("/api/v1/queue?datacenter=nope").json()["detail"]


def test_the_job_api_gives_priority_position_and_estimate(
    queue: dict[str, Job], alice: User, alice_api: APIClient
) -> None:
    one = alice_api.get("/api/v1/jobs/a1").json()
    assert (one["priority"], one["queue_position"], one["estimated_start"]) == ("normal", 3, None)  # no history yet
    listed = {j["name"]: j for j in alice_api.get("/api/v1/jobs").json()["results"]}
    assert listed["a1"]["queue_position"] is None and listed["a1"]["priority"] == "normal"
    # A finished job of 10 minutes: one job runs at a time, so the third waiting starts in about 3 x 10 minutes.
    now = timezone.now()
    done = make_job(queue["busy"].datacenter, alice, "done", state=JobState.SUCCEEDED)
    ten_minutes = {"started_at": now - timedelta(minutes=20), "finished_at": now - timedelta(minutes=10)}
    Job.objects.filter(pk=done.pk).update(**ten_minutes)
    cache.clear()  # a finished job written here, not ended: the queue's fingerprint did not change
    one = alice_api.get("/api/v1/jobs/a1").json()
    start = parse_time(one["estimated_start"])
    assert start is not None
    assert timedelta(minutes=29) < start - now < timedelta(minutes=31)
    in_queue = parse_time(rows(alice_api)[2]["estimated_start"])
    assert in_queue is not None and abs((in_queue - start).total_seconds()) < 60
    running = alice_api.get("/api/v1/jobs/busy").json()  # admitted: no longer in the queue
    assert (running["queue_position"], running["estimated_start"]) == (None, None)


def test_priorities_lists_the_classes_the_caller_may_use(
    classes: None, alice_api: APIClient, carol_api: APIClient
) -> None:
    mine = alice_api.get("/api/v1/priorities").json()["results"]
    assert [(p["name"], p["value"]) for p in mine] == [("normal", 100), ("low", 0)]
    assert [p["name"] for p in carol_api.get("/api/v1/priorities").json()["results"]] == ["high", "normal", "low"]


def test_an_operator_holds_releases_and_moves_a_job_to_the_front(
    queue: dict[str, Job], carol_api: APIClient, alice_api: APIClient
) -> None:
    held = carol_api.post("/api/v1/jobs/a1-alice/hold")
    assert held.status_code == 200, held.json()
    assert (held.json()["reason"], held.json()["message"]) == ("Held", "held by an operator")
    answer = rows(alice_api)
    assert [(r["job"], r["position"], r["reason"]) for r in answer][-1] == ("a1", None, "Held")
    assert [r["job"] for r in answer] == [None, None, "a2", "a-low", "a1"]
    assert cycle.schedule(queue["a1"].datacenter) == []
    assert Job.objects.get(pk=queue["a1"].pk).reason == "Held"  # a cycle leaves a held job's reason alone

    released = carol_api.post("/api/v1/jobs/a1/release?owner=alice")
    assert released.status_code == 200 and released.json()["reason"] == ""
    assert [r["job"] for r in rows(carol_api)] == ["urgent", "b1", "a1", "a2", "a-low"]

    fronted = carol_api.post("/api/v1/jobs/a2/front?owner=alice")
    assert fronted.status_code == 200, fronted.json()
    # Ahead of bob's fairer claim and of a1's age, but not of a higher priority.
    assert [r["job"] for r in rows(carol_api)] == ["urgent", "a2", "b1", "a1", "a-low"]


def test_users_may_not_use_the_operators_verbs(queue: dict[str, Job], alice_api: APIClient, bob_api: APIClient) -> None:
    for api in (alice_api, bob_api):
        for verb in ("hold", "release", "front"):
            answer = api.post(f"/api/v1/jobs/a1/{verb}")
            assert answer.status_code == 403, answer.json()
    job = Job.objects.get(pk=queue["a1"].pk)
    assert (job.held, job.queue_boost, job.reason) == (False, False, "WaitingForCapacity")


def test_a_job_no_longer_waiting_cannot_be_held(queue: dict[str, Job], alice: User, carol_api: APIClient) -> None:
    admitted = carol_api.post("/api/v1/jobs/busy-alice/hold")  # admitted by the cycle, starting
    assert admitted.status_code == 409, admitted.json()
    assert admitted.json()["errors"][0]["field"] == "state"
    running = make_job(queue["busy"].datacenter, alice, "running", state=JobState.RUNNING)
    for verb in ("hold", "release", "front"):
        answer = carol_api.post(f"/api/v1/jobs/{running.uid}/{verb}")
        assert answer.status_code == 409, answer.json()
        assert answer.json()["errors"][0]["field"] == "state" and "running" in answer.json()["detail"]
    assert not Job.objects.get(pk=running.pk).held


def test_an_unknown_job_is_a_404(classes: None, carol_api: APIClient) -> None:
    assert carol_api.post("/api/v1/jobs/nothing/hold").status_code == 404


def test_the_submit_form_offers_the_users_classes_and_submits_with_one(
    local_dc: Datacenter, classes: None, alice: User
) -> None:
    page = Client()
    page.force_login(alice)
    form = page.get("/jobs/new").context["form"]
    assert [name for name, _ in form.fields["priority"].choices] == ["normal", "low"]  # not `high`: staff's
    assert 'value="normal" selected' in page.get("/jobs/new").content.decode()
    Path(local_dc.storage_root, "home/alice/jobs/fresh").mkdir(parents=True)
    body = {"jobname": "fresh", "entry": "python train.py", "datacenter": "local"}
    refused = page.post("/jobs/new", {**body, "priority": "high"})
    assert refused.status_code == 400 and "priority" in refused.context["form"].errors
    assert page.post("/jobs/new", {**body, "priority": "low"}).status_code == 302
    assert Job.objects.get(name="fresh").priority_class == "low"


def test_a_job_that_will_preempt_says_how_many_and_when_and_its_victim_what_for(
    one_core: Datacenter, alice: User, bob: User
) -> None:
    """While its preemption delay runs, the waiting job's message says it will preempt (how many, at what time:
    the same words every cycle, so one event); once it does, the victim is told for whom and what it lost."""
    low = make_job(one_core, alice, "low", priority="low")
    assert cycle.schedule(one_core) == [low.pk]
    Job.objects.filter(pk=low.pk).update(state=JobState.RUNNING)
    urgent = make_job(one_core, bob, "urgent", priority="high")
    assert cycle.schedule(one_core) == [] and cycle.schedule(one_core) == []
    urgent.refresh_from_db()
    assert urgent.reason == "WaitingForCapacity", urgent.message
    assert "; unless room frees first, it preempts 1 running job of lower priority at " in urgent.message
    assert urgent.events.filter(kind=EventKind.QUEUED).count() == 1  # one event over two cycles
    Job.objects.filter(pk=urgent.pk).update(queued_at=timezone.now() - timedelta(seconds=120))
    cycle.schedule(one_core)
    low.refresh_from_db()
    assert (low.state, low.reason) == (JobState.QUEUED, "Preempted")
    assert low.message.startswith("preempted for a waiting job of priority 1000, chosen among the jobs that make "
                                  "room by the lowest priority, then the least work lost ("), low.message  # fmt: skip
    assert "bob" not in low.message and "urgent" not in low.message  # another user's job is never named
