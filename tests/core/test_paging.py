"""Pages of a totally ordered list read from its nearer end: the rows of one forward read, without a long OFFSET."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import F, OrderBy
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from core.paging import NearerEndPaginator, totally_ordered
from datacenters.models import Datacenter
from jobs.models import Job
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def users() -> None:
    now = timezone.now()
    for number in range(11):  # joined in three seconds only: ties the primary key breaks
        User.objects.create(username=f"u{number:02}", date_joined=now - timedelta(seconds=number % 3))


@pytest.mark.parametrize("order", [("-date_joined", "-pk"), ("date_joined", "id"), (F("date_joined").desc(), "-id")])
def test_every_page_is_one_forward_reads_and_the_later_half_reads_no_long_offset(
    users: None, order: tuple[str | OrderBy, ...]
) -> None:
    rows = User.objects.order_by(*order)
    assert totally_ordered(rows)
    expected = list(rows)
    for per_page in (1, 2, 4, 11, 12):
        paginator = NearerEndPaginator(rows, per_page)
        got = [user for number in paginator.page_range for user in paginator.page(number)]
        assert got == expected, per_page
    with CaptureQueriesContext(connection) as captured:
        assert list(NearerEndPaginator(rows, 2).page(6)) == expected[10:]
    assert "OFFSET" not in captured.captured_queries[-1]["sql"].upper()  # read backwards from the end


def test_a_list_not_ordered_by_its_key_is_read_forwards(users: None) -> None:
    rows = User.objects.order_by("-date_joined")  # ties in no defined order: a backward read would not mirror it
    assert not totally_ordered(rows) and not totally_ordered(User.objects.all())
    with CaptureQueriesContext(connection) as captured:
        assert len(NearerEndPaginator(rows, 2).page(6)) == 1
    assert "OFFSET 10" in captured.captured_queries[-1]["sql"].upper()


def test_the_job_apis_pages_together_are_its_order_however_the_jobs_tie(
    alice: User, alice_api: APIClient, local_dc: Datacenter
) -> None:
    now = timezone.now()
    for number in range(9):
        job = make_job(local_dc, alice, f"j{number}")
        Job.objects.filter(pk=job.pk).update(created_at=now - timedelta(seconds=number % 2))
    expected = list(Job.objects.filter(owner=alice).order_by("-created_at", "-pk").values_list("uid", flat=True))
    got = []
    for page in range(1, 6):
        answer = alice_api.get("/api/v1/jobs", {"page": page, "page_size": 2})
        assert answer.status_code == 200 and answer.json()["count"] == 9
        got += [job["uid"] for job in answer.json()["results"]]
    assert got == expected
    assert alice_api.get("/api/v1/jobs", {"page": 6, "page_size": 2}).status_code == 404
