"""Stall detection (jobs.follow.stalls) on real local jobs: a silent trainer is Stalled in time, `fail` fails it, a
talkative one never is; the spec's bounds are the API's 400s."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.follow import stalls
from jobs.models import Job
from tests.wait import wait_for
from tests.workers import WorkerProcess

pytestmark = [pytest.mark.celery, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

SILENT = {"FAKE_STEPS": "1", "FAKE_STEP_SECONDS": "600"}  # one line, then nothing for ten minutes


def submit(api: APIClient, env: dict[str, str], **spec: Any) -> str:
    body = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "env": env, **spec}
    created = api.post("/api/v1/jobs", body, format="json")
    assert created.status_code == 201, created.json()
    return str(created.json()["uid"])


def warnings_of(api: APIClient, uid: str) -> list[dict[str, str]]:
    answer: list[dict[str, str]] = api.get(f"/api/v1/jobs/{uid}").json()["warnings"]
    return answer


def test_a_silent_trainer_is_stalled_within_a_minute_of_its_30s_timeout(
    alice_api: APIClient, fake_package: Path, worker: WorkerProcess
) -> None:
    uid = submit(alice_api, SILENT, stall_timeout=30)
    wait_for(lambda: Job.objects.filter(uid=uid, state="running").exists(), "running", 60, watch=worker)
    warned = wait_for(lambda: warnings_of(alice_api, uid), "a Stalled warning", 60, interval=1, watch=worker)
    assert warned[0]["reason"] == "Stalled"
    assert "no trainer has written a log line or used CPU since" in warned[0]["message"]
    job = alice_api.get(f"/api/v1/jobs/{uid}").json()
    assert job["state"] == "running"  # `warn` (the default) lets it run
    kinds = [e["kind"] for e in alice_api.get(f"/api/v1/jobs/{uid}/events").json()["results"]]
    assert "Stalled" in kinds
    alice_api.delete(f"/api/v1/jobs/{uid}")


def test_stall_action_fail_fails_the_job_as_stalled(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, worker: WorkerProcess
) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(stall_timeout=3)  # the default, below the spec's minimum
    uid = submit(alice_api, SILENT, stall_action="fail")
    ended = wait_for(
        lambda: (j := alice_api.get(f"/api/v1/jobs/{uid}").json())["state"] in ("failed", "succeeded") and j,
        "the job to fail", 90, interval=0.5, watch=worker,
    )  # fmt: skip
    assert (ended["state"], ended["reason"]) == ("failed", "Stalled"), ended
    assert "no trainer has written a log line or used CPU for 3s" in ended["message"]


def test_a_trainer_that_keeps_logging_is_never_stalled(
    alice_api: APIClient, local_dc: Datacenter, fake_package: Path, worker: WorkerProcess
) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(stall_timeout=3)
    uid = submit(alice_api, {"FAKE_STEPS": "100", "FAKE_STEP_SECONDS": "0.1"}, stall_action="fail")
    done = wait_for(
        lambda: (j := alice_api.get(f"/api/v1/jobs/{uid}").json())["state"] in ("failed", "succeeded") and j,
        "the job to end", 90, interval=0.5, watch=worker,
    )  # fmt: skip
    assert done["state"] == "succeeded", done
    kinds = [e["kind"] for e in alice_api.get(f"/api/v1/jobs/{uid}/events").json()["results"]]
    assert "Stalled" not in kinds


@pytest.mark.parametrize(
    ("field", "value"), [("stall_timeout", 9), ("stall_timeout", 7 * 86400 + 1), ("stall_action", "panic")]
)
def test_a_stall_setting_out_of_bounds_is_a_400_naming_it(
    alice_api: APIClient, local_dc: Datacenter, field: str, value: Any
) -> None:
    body = {"jobname": "bad", "entry": "python train.py", field: value}
    answer = alice_api.post("/api/v1/jobs", body, format="json")
    assert answer.status_code == 400
    assert field in str(answer.json()), answer.json()


def _running_job(datacenter: Datacenter, owner: Any, started_minutes_ago: int) -> Job:
    return Job.objects.create(
        owner=owner, datacenter=datacenter, name="fake", uid="fake-abc12", state="running",
        started_at=timezone.now() - timedelta(minutes=started_minutes_ago),
        spec={"jobname": "fake", "entry": "python train.py", "parallelism": 1, "pservers": 0, "stall_timeout": 60},
    )  # fmt: skip


def test_a_job_without_a_log_past_its_timeout_is_stalled_once(local_dc: Datacenter, alice: Any) -> None:
    job = _running_job(local_dc, alice, started_minutes_ago=5)
    assert stalls.check(job) == ""  # `warn`: it runs on
    job.refresh_from_db()
    assert job.stalled_at is not None and job.warnings[0]["reason"] == "Stalled"
    stalls.forget(job.pk)
    stalls.check(job)
    assert list(job.events.values_list("kind", flat=True)) == ["Stalled"]  # marked once, not every look


def test_nothing_is_judged_where_the_portal_does_not_mount_the_storage(local_dc: Datacenter, alice: Any) -> None:
    Datacenter.objects.filter(pk=local_dc.pk).update(storage_root="/nonexistent/pfs")
    local_dc.refresh_from_db()
    job = _running_job(local_dc, alice, started_minutes_ago=5)
    assert stalls.check(job) == ""
    job.refresh_from_db()
    assert job.stalled_at is None and not job.events.exists()
