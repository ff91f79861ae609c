"""A job's timeline (jobs.events): each transition of real local jobs an event; owner-only; bounded; on the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs import events
from jobs.models import EventKind, Job, JobEvent
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

SPEC: dict[str, Any] = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 1}


def submit(api: APIClient, **env: str) -> str:
    created = api.post("/api/v1/jobs", {**SPEC, "env": env}, format="json")
    assert created.status_code == 201, created.json()
    return str(created.json()["uid"])


def released(uid: str, worker: WorkerProcess) -> None:
    wait_for(lambda: Job.objects.get(uid=uid).released, f"{uid} to be released", 90, watch=worker)


def timeline(api: APIClient, uid: str) -> list[tuple[str, str, str]]:
    answer = api.get(f"/api/v1/jobs/{uid}/events")
    assert answer.status_code == 200, answer.json()
    return [(e["kind"], e["worker"], e["message"]) for e in answer.json()["results"]]


def test_a_succeeded_job_has_each_transition_as_an_event(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    uid = submit(alice_api, FAKE_STEPS="30")  # 3 s: long enough to be seen running
    released(uid, worker)
    seen = timeline(alice_api, uid)
    kinds = [kind for kind, _, _ in seen]
    assert kinds[0] == "Submitted" and seen[0][2].startswith("to datacenter local: 2 trainer(s) and 1 pserver(s)")
    assert kinds.index("Admitted") < kinds.index("WorkerStarted")
    states = [message.split(" ")[0] for kind, _, message in seen if kind == "State"]
    assert states == ["pending", "running", "succeeded"], seen
    started = {name for kind, name, _ in seen if kind == "WorkerStarted"}
    assert started == {"trainer-0", "trainer-1", "pserver-0"}, seen
    exits = {name: message for kind, name, message in seen if kind == "WorkerExited"}
    assert all("exited with code 0" in exits[name] for name in ("trainer-0", "trainer-1")), seen


def test_a_failed_worker_and_the_failed_job_are_events(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    uid = submit(alice_api, FAKE_FAIL_TRAINER="1", FAKE_EXIT_CODE="3", FAKE_STEPS="20")
    released(uid, worker)
    seen = timeline(alice_api, uid)
    trainer_1 = [message for kind, name, message in seen if kind == "WorkerExited" and name == "trainer-1"]
    assert trainer_1 and "exited with code 3" in trainer_1[0], seen
    final = [message for kind, _, message in seen if kind == "State"][-1]
    assert final.startswith("failed TrainerFailed: trainer 1 exited with code 3"), seen


def test_a_killed_job_says_so_and_its_workers_are_killed(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    uid = submit(alice_api, FAKE_STEPS="600")
    wait_for(lambda: Job.objects.filter(uid=uid, state="running").exists(), "running", 60, watch=worker)
    assert alice_api.delete(f"/api/v1/jobs/{uid}").status_code == 200
    released(uid, worker)
    seen = timeline(alice_api, uid)
    assert any(kind == "State" and message.startswith("killed") for kind, _, message in seen), seen
    assert {name for kind, name, _ in seen if kind == "WorkerKilled"} >= {"trainer-0", "trainer-1"}, seen


@pytest.mark.django_db
def test_events_are_the_owners_and_staffs_only(
    alice_api: APIClient, bob_api: APIClient, carol_api: APIClient, anon_api: APIClient, local_dc: Any, alice: Any
) -> None:
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="mine", uid="mine-abc12", spec={**SPEC})
    events.record(job.pk, EventKind.SUBMITTED, "to datacenter local")
    assert [e["kind"] for e in alice_api.get("/api/v1/jobs/mine/events").json()["results"]] == ["Submitted"]
    assert bob_api.get("/api/v1/jobs/mine/events").status_code == 404
    assert bob_api.get("/api/v1/jobs/mine-abc12/events").status_code == 404
    assert carol_api.get("/api/v1/jobs/mine-abc12/events", {"owner": "alice"}).status_code == 200  # as other routes
    assert anon_api.get("/api/v1/jobs/mine/events").status_code in (401, 403)


@pytest.mark.django_db
def test_a_job_keeps_its_first_events_then_one_dropped_line(
    local_dc: Any, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "MAX_EVENTS", 3)
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="chatty", uid="chatty-abc12", spec={**SPEC})
    for restart in range(1, 8):
        events.record(job.pk, EventKind.WORKER_RESTARTED, f"restart {restart}\nsecond line " + "x" * 900, "trainer-0")
    kept = list(JobEvent.objects.filter(job=job).values_list("kind", "message"))
    assert [kind for kind, _ in kept] == ["WorkerRestarted"] * 3 + ["EventsDropped"]
    assert all("\n" not in message and len(message) <= events.MAX_MESSAGE for _, message in kept)


@pytest.mark.django_db
def test_the_job_page_lists_its_events(client: Client, local_dc: Any, alice: Any) -> None:
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="shown", uid="shown-abc12", spec={**SPEC})
    events.record(job.pk, EventKind.SUBMITTED, "to datacenter <local>")
    client.force_login(alice)
    page = client.get(f"/jobs/{job.uid}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-testid="events"' in text and "Submitted" in text and "to datacenter &lt;local&gt;" in text
    Job.objects.filter(pk=job.pk).update(state="running", stalled_at=job.created_at)
    live = client.get(f"/jobs/{job.uid}/live").content.decode()
    assert 'data-testid="job-warning"' in live and "Stalled" in live and "no trainer has written a log line" in live


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("before", "after", "kind", "message"),
    [
        (None, {"state": "running", "restarts": 0, "host": "n1"}, "WorkerStarted", "started on n1"),
        (("running", 0), {"state": "running", "restarts": 1}, "WorkerRestarted", "restart 1"),
        (("running", 0), {"state": "failed", "restarts": 0, "exit_code": 137,
                          "message": "trainer 0 went over its memory limit (1Gi) and was killed"},
         "WorkerOOMKilled", "trainer 0 went over its memory limit (1Gi) and was killed"),
        (("running", 0), {"state": "failed", "restarts": 0, "exit_code": 2, "message": "No such file"},
         "WorkerExited", "exited with code 2: No such file"),
        (("running", 0), {"state": "killed", "restarts": 0, "message": ""}, "WorkerKilled", "killed"),
    ],
)  # fmt: skip
def test_each_worker_change_is_its_event(
    local_dc: Any, alice: Any, before: tuple[str, int] | None, after: dict[str, Any], kind: str, message: str
) -> None:
    job = Job.objects.create(owner=alice, datacenter=local_dc, name="w", uid="w-abc12", spec={**SPEC})
    events.worker_changed(job.pk, "trainer-0", before, after)
    assert list(JobEvent.objects.filter(job=job).values_list("kind", "worker", "message")) == [
        (kind, "trainer-0", message)
    ]
    events.worker_changed(job.pk, "trainer-0", (after["state"], after["restarts"]), after)  # no change: no event
    assert JobEvent.objects.filter(job=job).count() == 1
