"""Job pages: alice sees her jobs and kills one; bob gets 404; anonymous goes to login."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job

SPEC = {"jobname": "fake", "entry": "python train.py", "parallelism": 2, "pservers": 1}


def test_alice_sees_her_job_and_kills_it_from_the_page(
    alice: User, alice_api: APIClient, local_dc: Datacenter, fake_package: Path
) -> None:
    uid = alice_api.post("/api/v1/jobs", SPEC, format="json").json()["uid"]
    client = Client()
    client.force_login(alice)
    listing = client.get("/jobs/").content.decode()
    assert uid in listing and "queued" in listing
    assert f"/jobs/{uid}/" in client.get("/").content.decode()  # the dashboard's recent jobs
    detail = client.get(f"/jobs/{uid}/").content.decode()
    assert "trainer-1" in detail and "pserver-0" in detail and "Kill" in detail
    response = client.post(f"/jobs/{uid}/kill", follow=True)
    assert "killed; its name is free again" in response.content.decode()
    assert Job.objects.get(uid=uid).state == "killed"


def test_bob_gets_404_for_alice_job_page(
    alice_api: APIClient, bob: User, local_dc: Datacenter, fake_package: Path
) -> None:
    uid = alice_api.post("/api/v1/jobs", SPEC, format="json").json()["uid"]
    client = Client()
    client.force_login(bob)
    assert client.get(f"/jobs/{uid}/").status_code == 404
    assert client.post(f"/jobs/{uid}/kill").status_code == 404
    assert uid not in client.get("/jobs/").content.decode()
    assert Job.objects.get(uid=uid).state == "queued"


def test_carol_the_operator_opens_any_job_page(
    alice_api: APIClient, carol: User, local_dc: Datacenter, fake_package: Path
) -> None:
    uid = alice_api.post("/api/v1/jobs", SPEC, format="json").json()["uid"]
    client = Client()
    client.force_login(carol)
    assert client.get(f"/jobs/{uid}/").status_code == 200
    assert client.get("/admin/jobs/job/").status_code == 200


def test_anonymous_is_sent_to_login(db: None) -> None:
    response = Client().get("/jobs/")
    assert response.status_code == 302 and "/login/" in response["Location"]
