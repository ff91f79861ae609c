"""The operators' health page: staff only; capacity and use, jobs, the last reconcile, stale heartbeats marked."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from datacenters.models import Datacenter
from health.models import WorkerHeartbeat
from jobs import reconcile_runs
from jobs.tasks import _reconcile_each
from tests.conftest import PASSWORD
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


def logged_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_it_is_refused_to_users_and_anonymous(alice: User) -> None:
    assert logged_in(alice).get("/health/").status_code == 403
    answer = Client().get("/health/")
    assert answer.status_code == 302 and "/login/" in answer["Location"]


def test_it_shows_each_datacenters_jobs_and_its_last_reconcile(carol: User, alice: User, local_dc: Datacenter) -> None:
    make_job(local_dc, alice, "waiting")
    page = logged_in(carol).get("/health/").content.decode()
    assert 'data-datacenter="local"' in page and "none recorded" in page
    _reconcile_each([local_dc])  # what the reconcile task does each tick
    last = reconcile_runs.last(local_dc.pk)
    assert last is not None and last["error"] == "" and 0 <= last["seconds"] < 60
    page = logged_in(carol).get("/health/").content.decode()
    assert "ago, took" in page and "none recorded" not in page


def test_a_worker_that_missed_its_heartbeats_is_marked_stale(carol: User, settings: object) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="fresh", last_seen=now, beats=3)
    WorkerHeartbeat.objects.create(hostname="gone", last_seen=now - timedelta(hours=1), beats=9)
    page = logged_in(carol).get("/health/").content.decode()
    assert page.count('data-stale="true"') == 1 and page.count('data-stale="false"') == 1
    assert page.index("gone") > page.index("fresh")  # newest first


def test_an_entry_that_is_not_what_record_wrote_reads_as_unknown(local_dc: Datacenter) -> None:
    cache.set(f"reconcile-run:{local_dc.pk}", {"at": "yesterday"})
    assert reconcile_runs.last(local_dc.pk) is None
