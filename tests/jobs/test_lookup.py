"""jobs.lookup: which run a name means, the same for the API (`/api/v1/jobs/<name>`) and the pages (`/jobs/<ref>/`)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.lookup import job_named
from jobs.models import Job, JobState
from tests.pages.test_pages import make_job, page_client


def _aged(job: Job, days: int) -> Job:
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(days=days))
    return Job.objects.get(pk=job.pk)


def test_a_name_means_its_active_run_in_the_api_and_on_the_page(
    local_dc: Datacenter, alice: User, alice_api: APIClient
) -> None:
    active = _aged(make_job(local_dc, alice, uid="fit-old00", state=JobState.RUNNING, released=False), days=2)
    make_job(local_dc, alice, uid="fit-new00")  # newer, finished
    assert job_named(Job.objects.all(), "fit", alice) == active
    assert alice_api.get("/api/v1/jobs/fit").json()["uid"] == "fit-old00"
    assert 'data-uid="fit-old00"' in page_client(alice).get("/jobs/fit/").content.decode()


def test_without_an_active_run_a_name_means_the_newest(local_dc: Datacenter, alice: User) -> None:
    old = _aged(make_job(local_dc, alice, uid="fit-old00"), days=2)
    newest = make_job(local_dc, alice, uid="fit-new00")
    assert job_named(Job.objects.all(), "fit", alice) == newest
    assert job_named(Job.objects.all(), "fit-old00", alice) == old  # a uid pins its run
    assert job_named(Job.objects.all(), "nope", alice) is None


def test_an_operator_means_their_own_run_first(
    local_dc: Datacenter, alice: User, carol: User, carol_api: APIClient
) -> None:
    make_job(local_dc, alice, uid="fit-alice", state=JobState.RUNNING, released=False)
    _aged(make_job(local_dc, carol, uid="fit-carol"), days=2)
    assert carol_api.get("/api/v1/jobs/fit?all=1").json()["uid"] == "fit-carol"
    assert 'data-uid="fit-carol"' in page_client(carol).get("/jobs/fit/").content.decode()
    assert carol_api.get("/api/v1/jobs/fit-alice?all=1").json()["uid"] == "fit-alice"  # anyone's, by uid


def test_removing_by_a_name_several_runs_share_picks_none_and_lists_their_uids(
    local_dc: Datacenter, alice: User, alice_api: APIClient
) -> None:
    _aged(make_job(local_dc, alice, uid="fit-old00"), days=2)
    make_job(local_dc, alice, uid="fit-new00")
    refused = alice_api.delete("/api/v1/jobs/fit?rm=1")
    assert refused.status_code == 409, refused.json()
    assert refused.json()["errors"][0]["field"] == "name"
    assert "has several runs (fit-new00, fit-old00); remove one by its uid" in refused.json()["errors"][0]["message"]
    assert Job.objects.filter(name="fit").count() == 2  # nothing removed on a guess
    assert alice_api.delete("/api/v1/jobs/fit-old00?rm=1").status_code == 204  # a uid pins its run
    assert alice_api.delete("/api/v1/jobs/fit?rm=1").status_code == 204  # the one run left: no guess
    assert not Job.objects.filter(name="fit").exists()
