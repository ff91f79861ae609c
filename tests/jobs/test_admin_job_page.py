"""The admin's job page: the spec and engine data as key/value tables (escaped, bounded), the timeline, links to
the job page and to each worker's log (the viewer opens on the worker the link names)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from datacenters.models import Datacenter
from jobs import events
from jobs.models import EventKind, Job
from jobs.web import admin_display
from tests.conftest import PASSWORD
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db

LONG = "x" * (admin_display.MAX_TEXT + 500)


def logged_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def job(local_dc: Datacenter, alice: User) -> Job:
    job = make_job(local_dc, alice, "fit")
    spec = {**job.spec, "parallelism": 2, "pservers": 1, "env": {"LR": "0.1", "NOTE": "<b>bold</b>", "LONG": LONG},
            "volumes": [{"path": "/pfs/data", "readonly": True}]}
    Job.objects.filter(pk=job.pk).update(spec=spec, engine_data={"pids": {"trainer-0": 4242}, "empty": {}})
    events.record(job.pk, EventKind.QUEUED, "Held: an operator holds it")
    job.refresh_from_db()
    return job


def test_the_spec_and_engine_data_are_tables_not_raw_json(job: Job, carol: User) -> None:
    page = logged_in(carol).get(f"/admin/jobs/job/{job.pk}/change/").content.decode()
    assert '<th scope="row">env</th><td><table class="json-table"><tr><th scope="row">LR</th>' in page
    assert '<th scope="row">[0]</th><td><table class="json-table"><tr><th scope="row">path</th>' in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page  # the user's text is escaped
    assert f"… ({len(LONG)} characters)" in page and LONG not in page  # a long value is cut, its length said
    assert '<th scope="row">trainer-0</th><td><span class="json-value">4242</span>' in page
    assert "&quot;LR&quot;" not in page and "&quot;pids&quot;" not in page  # no raw JSON of either
    assert "Held: an operator holds it" in page  # the timeline inline stays


def test_it_links_the_job_page_and_each_workers_log(job: Job, carol: User) -> None:
    client = logged_in(carol)
    page = client.get(f"/admin/jobs/job/{job.pk}/change/").content.decode()
    assert f'href="/jobs/{job.uid}/">Job page</a>' in page
    for worker in ("trainer-0", "trainer-1", "pserver-0"):
        assert f'href="/jobs/{job.uid}/logs?worker={worker}">view log</a>' in page
        assert f'href="/jobs/{job.uid}/logs/{worker}/download">download</a>' in page
    viewer = client.get(f"/jobs/{job.uid}/logs?worker=trainer-1").content.decode()
    assert 'data-chosen="trainer-1"' in viewer and '<option value="trainer-1" selected>' in viewer
    other = client.get(f"/jobs/{job.uid}/logs?worker=trainer-9").content.decode()  # not a worker: ignored
    assert 'data-chosen=""' in other and '<option value="trainer-0" selected>' in other


def test_a_wide_value_is_bounded_in_rows() -> None:
    html = admin_display.json_table({"items": list(range(admin_display.MAX_ROWS + 50))})
    assert html.count("<tr>") == admin_display.MAX_ROWS + 1  # the budget's rows and one "more" line
    assert "… 51 more not shown" in html


def test_users_cannot_open_the_admin(job: Job, alice: User) -> None:
    answer = logged_in(alice).get(f"/admin/jobs/job/{job.pk}/change/")
    assert answer.status_code == 302 and "/admin/login/" in answer["Location"]
