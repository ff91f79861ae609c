"""Submit answers what happened (issue 21): with the broker down the job exists and is sent later (201,
`queued`), with the database down a 503 with Retry-After, and a retried submit with its idempotency key
gets the job it created, never a second one or a name conflict."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import issue_token
from jobs import services
from jobs.models import Job
from tests import workers
from tests.servers import closed_port, portal
from tests.wait import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = {"jobname": "fake", "entry": "python train.py", "parallelism": 1, "pservers": 0, "env": {"FAKE_STEPS": "600"}}


@pytest.mark.celery
def test_with_the_broker_down_a_submit_answers_201_queued_and_the_job_runs_later(
    alice: User, fake_package: Path, tmp_path: Path
) -> None:
    headers = {"Authorization": f"Token {issue_token(alice).key}"}
    with portal(tmp_path, CELERY_BROKER_URL=f"redis://127.0.0.1:{closed_port()}/0") as url:
        answer = requests.post(f"{url}/api/v1/jobs", json=SPEC, headers=headers, timeout=60)
    assert answer.status_code == 201, answer.text
    assert answer.json()["state"] == "queued"
    assert Job.objects.count() == 1
    # The broker is back (the test's own): the scheduler's periodic cycle admits and starts the job.
    worker = workers.start_worker(tmp_path, beat=True)
    try:
        started = wait_for(
            lambda: Job.objects.exclude(state="queued").first(), "the job to be sent", 60, watch=worker
        )
        assert started.state in ("submitting", "pending", "running"), started.state
        assert Job.objects.count() == 1
    finally:
        job = Job.objects.get()
        services.kill(job)
        wait_for(lambda: Job.objects.get(pk=job.pk).released, "the job to be released", 60, watch=worker)
        worker.stop()


def test_with_the_database_down_the_api_answers_503_with_retry_after(alice: User, tmp_path: Path) -> None:
    headers = {"Authorization": f"Token {issue_token(alice).key}"}
    down = f"postgresql://paddlecloud:paddlecloud@127.0.0.1:{closed_port()}/paddlecloud"
    # As in production (DEBUG off): a page's error is the portal's answer, not Django's debug page.
    with portal(tmp_path, DATABASE_URL=down, DEBUG="false", PADDLECLOUD_EMBEDDED="true") as url:
        submit = requests.post(f"{url}/api/v1/jobs", json=SPEC, headers=headers, timeout=60)
        listing = requests.get(f"{url}/api/v1/jobs", headers=headers, timeout=60)
        session = {"sessionid": "a" * 32}  # a signed-in browser: its session is looked up in the database
        page = requests.get(f"{url}/jobs/", cookies=session, timeout=60, allow_redirects=False)
    for answer in (submit, listing):
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "5"
        body = answer.json()
        assert body["code"] == "database_unavailable" and set(body) == {"detail", "code", "errors"}
        assert "the database is unavailable" in body["detail"]
    assert (page.status_code, page.headers.get("Retry-After")) == (503, "5"), page.text[:500]


KEY = {"Idempotency-Key": "3f1c9a7e-submit-1"}


def test_a_retried_submit_with_its_key_gets_the_job_it_created(alice_api: APIClient, fake_package: Path) -> None:
    first = alice_api.post("/api/v1/jobs", SPEC, format="json", headers=KEY)
    assert first.status_code == 201, first.json()
    again = alice_api.post("/api/v1/jobs", SPEC, format="json", headers=KEY)
    assert again.status_code == 201, again.json()
    assert again.json()["uid"] == first.json()["uid"] and again["Idempotent-Replayed"] == "true"
    # Also once the job is over (its name free again, its quota given back): still that job, not a second.
    alice_api.delete(f"/api/v1/jobs/{first.json()['uid']}")
    late = alice_api.post("/api/v1/jobs", SPEC, format="json", headers=KEY)
    assert late.status_code == 201 and late.json()["uid"] == first.json()["uid"]
    assert Job.objects.count() == 1
    assert Job.objects.get().spec["idempotency_key"] == KEY["Idempotency-Key"]
    # Without a key (or with another), a submit is a new submission.
    other = alice_api.post("/api/v1/jobs", SPEC, format="json", headers={"Idempotency-Key": "another"})
    assert other.status_code == 201 and other.json()["uid"] != first.json()["uid"]


def test_an_idempotency_key_names_one_submission(alice_api: APIClient, fake_package: Path) -> None:
    assert alice_api.post("/api/v1/jobs", SPEC, format="json", headers=KEY).status_code == 201
    renamed = alice_api.post("/api/v1/jobs", {**SPEC, "jobname": "other"}, format="json", headers=KEY)
    assert renamed.status_code == 409
    assert renamed.json()["errors"][0]["field"] == "Idempotency-Key"
    for bad in ("", " padded ", "x" * 201, "caf\u00e9"):
        refused = alice_api.post("/api/v1/jobs", SPEC, format="json", headers={"Idempotency-Key": bad})
        assert refused.status_code == 400, bad
        assert refused.json()["errors"][0]["field"] == "Idempotency-Key"
    assert Job.objects.count() == 1
