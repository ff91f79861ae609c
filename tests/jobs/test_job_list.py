"""The job list page: sorted by a column (either way, ties newest first), filtered by submit date, bad input a 400."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.template import engines
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job
from jobs.web import listing
from tests.conftest import PASSWORD
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db


def names(client: Client, query: str) -> list[str]:
    page = client.get(f"/jobs/{query}")
    assert page.status_code == 200, page.content.decode()[:500]
    return re.findall(r'data-testid="job-row" data-job="([^"-]+)-', page.content.decode())


@pytest.fixture
def client(alice: User, local_dc: Datacenter) -> Client:
    now = timezone.now()
    for days_ago, name, state in [(3, "bravo", "succeeded"), (2, "alpha", "failed"), (1, "charlie", "running")]:
        job = make_job(local_dc, alice, name)
        started = now - timedelta(days=days_ago) if state != "failed" else None
        Job.objects.filter(pk=job.pk).update(created_at=now - timedelta(days=days_ago), state=state, started_at=started)
    browser = Client()
    assert browser.login(username="alice", password=PASSWORD)
    return browser


def test_newest_first_by_default_and_each_column_sorts_both_ways(client: Client) -> None:
    assert names(client, "") == ["charlie", "alpha", "bravo"]
    assert names(client, "?sort=submitted") == ["bravo", "alpha", "charlie"]
    assert names(client, "?sort=name") == ["alpha", "bravo", "charlie"]
    assert names(client, "?sort=-name") == ["charlie", "bravo", "alpha"]
    assert names(client, "?sort=state") == ["alpha", "charlie", "bravo"]  # failed, running, succeeded
    assert names(client, "?sort=-started") == ["charlie", "bravo", "alpha"]  # never started: last either way
    assert names(client, "?sort=started") == ["bravo", "charlie", "alpha"]


def test_a_header_links_its_sort_keeping_the_filters_and_flips_when_it_is_the_sort(client: Client) -> None:
    page = client.get("/jobs/?q=a&page=1").content.decode()
    assert 'href="?q=a&amp;sort=name" data-testid="sort-name"' in page and 'aria-sort="none"' in page
    page = client.get("/jobs/?q=a&sort=name").content.decode()
    assert 'aria-sort="ascending"><a class="sort" href="?q=a&amp;sort=-name"' in page


def test_the_submit_date_filters_whole_days(client: Client) -> None:
    today = timezone.localdate()
    two_days_ago = (today - timedelta(days=2)).isoformat()
    assert names(client, f"?since={two_days_ago}") == ["charlie", "alpha"]
    assert names(client, f"?until={two_days_ago}") == ["alpha", "bravo"]
    assert names(client, f"?since={two_days_ago}&until={two_days_ago}") == ["alpha"]


@pytest.mark.parametrize(
    ("query", "field"),
    [("?sort=password", "sort"), ("?since=yesterday", "since"), ("?since=2026-02-30", "since"),
     ("?since=2026-05-02&until=2026-05-01", "until"), ("?sort=" + "x" * 10_000, "sort")],
)  # fmt: skip
def test_a_bad_sort_or_date_is_a_400_naming_the_field(client: Client, query: str, field: str) -> None:
    page = client.get(f"/jobs/{query}")
    assert page.status_code == 400
    assert f"<p>{field}: " in page.content.decode()


@pytest.mark.parametrize("sort", list(listing.SORTS))
def test_every_page_of_every_sort_is_the_databases_own_order_read_in_parts(
    alice: User, bob: User, local_dc: Datacenter, sort: str
) -> None:
    """Pages reads a sort by state, datacenter or start as parts, one index order each: the same rows in the same
    order as one ORDER BY over them all, on every page (pages that span parts too), filtered or not."""
    other = Datacenter.objects.create(name="aaa-first", engine=local_dc.engine, storage_root=local_dc.storage_root)
    now = timezone.now()
    states = ["queued", "running", "succeeded", "failed", "killed"]
    for number in range(37):
        job = make_job(other if number % 3 == 0 else local_dc, bob if number % 7 == 0 else alice, f"j{number}")
        started = now - timedelta(minutes=number % 5) if number % 4 else None  # ties in start times too
        created = now - timedelta(hours=number % 6)  # ties in submit times: the id decides
        Job.objects.filter(pk=job.pk).update(state=states[number % 5], started_at=started, created_at=created)
    mine = Job.objects.filter(owner=alice)
    for jobs in (mine, mine.filter(name__contains="1"), Job.objects.all()):
        expected = list(jobs.order_by(*listing.SORTS[sort]).values_list("pk", flat=True))
        pages = listing.Pages(jobs, sort)
        assert pages.count() == len(expected)
        for size in (1, 4, 7, len(expected) + 3):
            got = [pk for start in range(0, len(expected), size) for pk in pages[start : start + size]]
            assert got == expected, (sort, size)


def test_a_list_reads_its_owners_and_datacenters_names_in_the_same_queries_however_many_rows(
    alice: User, bob: User, carol: User, local_dc: Datacenter
) -> None:
    """Job.objects.listed() joins only the owner's and datacenter's names: nothing of either is loaded row by row."""
    other = Datacenter.objects.create(name="second", engine=local_dc.engine, storage_root=local_dc.storage_root)
    operator = Client()
    assert operator.login(username="carol", password=PASSWORD)  # staff: everyone's jobs, with an owner column
    counts = []
    for rows in (2, 20):
        while Job.objects.count() < rows:
            number = Job.objects.count()
            make_job(other if number % 2 else local_dc, bob if number % 3 else alice, f"n{number}")
        with CaptureQueriesContext(connection) as page:
            text = operator.get("/jobs/").content.decode()
        with CaptureQueriesContext(connection) as api:
            listed = operator.get("/api/v1/jobs?all=1").json()["results"]
        counts.append((len(page.captured_queries), len(api.captured_queries)))
        assert text.count('data-testid="job-row"') == rows and "<td>second</td>" in text and "<td>bob</td>" in text
        assert len(listed) == rows and {j["datacenter"] for j in listed} == {"local", "second"}
        assert {j["owner"] for j in listed} == {"alice", "bob"} and all(j["output"].startswith("/pfs/") for j in listed)
    assert counts[0] == counts[1], counts


def test_a_row_shows_its_start_as_the_date_filters_did_and_the_filters_keep_what_was_asked(client: Client) -> None:
    """The rows' times are formatted by the view now (jobs/web/views.py _decorate), the filter controls written out
    (templates/jobs/list.html): both as Django's date/timesince filters and form widgets wrote them."""
    charlie = Job.objects.get(name="charlie")
    assert charlie.started_at is not None
    charlie.started_at = charlie.started_at.replace(microsecond=123456)
    Job.objects.filter(pk=charlie.pk).update(started_at=charlie.started_at)
    assert names(client, "?state=running") == ["charlie"]
    filters = engines["django"].from_string(
        "<time datetime=\"{{ t|date:'c' }}\" title=\"{{ t|date:'Y-m-d H:i:s' }} UTC\">{{ t|timesince }} ago</time>"
    )
    page = client.get("/jobs/?state=running").content.decode()
    assert filters.render({"t": charlie.started_at}) in page
    alpha = Job.objects.get(name="alpha")  # never started
    queued = engines["django"].from_string("title=\"queued {{ t|date:'Y-m-d H:i:s' }} UTC\">not yet")
    assert queued.render({"t": alpha.created_at}) in client.get("/jobs/?state=failed").content.decode()

    page = client.get("/jobs/?q=a%3Cb&state=running&sort=-name&since=2026-01-02").content.decode()
    assert '<option value="running" selected>' in page and page.count(" selected>") == 2
    assert '<option value="-name" selected>' in page
    assert 'name="q" id="id_q" maxlength="40" value="a&lt;b"' in page  # escaped, bounded as the form bounds it
    assert 'name="since" id="id_since" value="2026-01-02"' in page
    assert 'name="until" id="id_until" value=""' in page


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return " | ".join(str(row[-1]) for row in cursor.fetchall())


def test_on_sqlite_a_page_and_a_users_usage_are_index_reads_whatever_their_count(alice: User, client: Client) -> None:
    """The embedded default's plans: the list's order straight from its index (no sort of a second's ties), and
    what a user's admitted jobs hold from the holding index (not every one of their jobs: the home page)."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's planner, the embedded default's; PostgreSQL plans by its statistics of the rows")
    with CaptureQueriesContext(connection) as captured:
        assert client.get("/").status_code == 200
        assert client.get("/jobs/").status_code == 200
    usage = next(q["sql"] for q in captured.captured_queries if 'SUM("jobs_job"."cpu_request")' in q["sql"])
    assert "INDEX job_holding" in _plan(usage), _plan(usage)
    page = next(q["sql"] for q in captured.captured_queries if q["sql"].startswith('SELECT "jobs_job"."id" AS "pk"'))
    assert "INDEX job_owner_newest" in _plan(page) and "TEMP B-TREE" not in _plan(page), _plan(page)
