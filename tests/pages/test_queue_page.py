"""The queue page and the job page's place: others' jobs unnamed, staff's hold / release / front, refusals as
messages; the usage page.

Jobs are written directly and the real scheduling cycle admits what fits (one core: one job at a time),
so the order shown is the scheduler's own (jobs.scheduling.queue); no worker runs here.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job, JobState, PriorityClass, UsageRecord
from jobs.scheduling import cycle
from tests.jobs.test_queue_api import CLASSES, GI, make_job
from tests.pages.test_pages import page_client


def queued_world(dc: Datacenter, alice: User, bob: User, carol: User) -> dict[str, Job]:
    """One core: alice's `busy` runs; carol's high-priority job, bob's job and alice's two wait behind it."""
    for name, (value, open_to_all) in CLASSES.items():
        PriorityClass.objects.get_or_create(name=name, defaults={"value": value, "open_to_all": open_to_all})
    dc.capacity_cpu, dc.capacity_memory, dc.capacity_gpu = "1", "8Gi", 0
    dc.save()
    jobs = {"busy": make_job(dc, alice, "busy")}
    assert cycle.schedule(dc) == [jobs["busy"].pk]
    jobs["mine-1"] = make_job(dc, alice, "mine-1")
    jobs["mine-2"] = make_job(dc, alice, "mine-2", priority="low")
    jobs["bobs-secret-run"] = make_job(dc, bob, "bobs-secret-run")
    jobs["carols-urgent"] = make_job(dc, carol, "carols-urgent", priority="high")
    assert cycle.schedule(dc) == []
    return jobs


@pytest.fixture
def waiting(local_dc: Datacenter, alice: User, bob: User, carol: User) -> dict[str, Job]:
    return queued_world(local_dc, alice, bob, carol)


def queue_rows(html: str) -> list[str]:
    """Each row's cells as text, tags and extra spaces removed."""
    rows = re.findall(r'<tr data-testid="queue-row".*?</tr>', html, re.S)
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for row in rows]


def html_of(client: Client, url: str, status: int = 200, **headers: str) -> str:
    response = client.get(url, headers=headers)
    assert response.status_code == status, response.content[:500]
    return response.content.decode()


def test_a_user_sees_the_order_and_their_own_jobs_but_not_the_names_of_others(
    waiting: dict[str, Job], alice: User
) -> None:
    html = html_of(page_client(alice), "/queue/")
    rows = queue_rows(html)
    assert [row.split(" ")[0] for row in rows] == ["1", "2", "3", "4"]
    assert rows[0].startswith("1 another user's job high waiting for capacity")
    assert rows[1].startswith("2 another user's job normal")
    assert rows[2].startswith("3 mine-1 normal") and rows[3].startswith("4 mine-2 low")
    assert 'href="/jobs/mine-1-alice/"' in html and 'href="/jobs/mine-2-alice/"' in html
    for hidden in ("bobs-secret-run", "carols-urgent", ">bob<", ">carol<"):
        assert hidden not in html
    assert 'data-testid="hold"' not in html and "/queue/mine-1-alice/hold" not in html
    assert 'href="/queue/"' in html  # the nav's link


def test_staff_see_names_and_owners_and_get_the_buttons(waiting: dict[str, Job], carol: User) -> None:
    html = html_of(page_client(carol), "/queue/")
    rows = queue_rows(html)
    assert rows[0].startswith("1 carols-urgent carol high") and rows[1].startswith("2 bobs-secret-run bob normal")
    assert html.count('data-testid="hold"') == 4 and html.count('data-testid="front"') == 4
    assert "csrfmiddlewaretoken" in html


def test_staff_hold_release_and_move_a_job_to_the_front(waiting: dict[str, Job], carol: User, alice: User) -> None:
    staff = page_client(carol)
    held = staff.post("/queue/mine-1-alice/hold", follow=True)
    assert held.redirect_chain == [("/queue/?datacenter=local", 302)]
    html = held.content.decode()
    assert "Job mine-1 of alice held." in html
    assert queue_rows(html)[-1].startswith("held mine-1 alice normal held held by an operator")
    assert 'aria-label="Release mine-1"' in html
    assert queue_rows(html_of(page_client(alice), "/queue/"))[-1].startswith("held mine-1")

    released = staff.post("/queue/mine-1-alice/release", follow=True).content.decode()
    assert "Job mine-1 of alice released." in released and not Job.objects.get(uid="mine-1-alice").held
    fronted = staff.post("/queue/mine-1-alice/front", follow=True).content.decode()
    assert "moved to the front of its priority" in fronted
    assert [row.split(" ")[1] for row in queue_rows(fronted)] == ["carols-urgent", "mine-1", "bobs-secret-run",
                                                                   "mine-2"]  # fmt: skip


def test_a_job_no_longer_waiting_is_refused_with_a_message_not_an_error(
    waiting: dict[str, Job], local_dc: Datacenter, alice: User, carol: User
) -> None:
    staff = page_client(carol)
    admitted = staff.post("/queue/busy-alice/hold", follow=True)
    assert admitted.status_code == 200
    assert "Job busy is already admitted (starting); only a job waiting in the queue can be held." in (
        admitted.content.decode())  # fmt: skip
    running = make_job(local_dc, alice, "running", state=JobState.RUNNING)
    for verb in ("hold", "release", "front"):
        answer = staff.post(f"/queue/{running.uid}/{verb}", follow=True)
        assert answer.status_code == 200 and "Job running is running; only a job waiting" in answer.content.decode()
    assert not Job.objects.get(pk=running.pk).held
    gone = staff.post("/queue/no-such-job/hold", follow=True)
    assert gone.status_code == 200 and "Job no-such-job is gone" in gone.content.decode()
    assert staff.post("/queue/mine-1-alice/delete").status_code == 404  # not a verb of the queue


def test_users_may_not_change_the_queue(waiting: dict[str, Job], alice: User, bob: User) -> None:
    for user in (alice, bob):
        for verb in ("hold", "release", "front"):
            assert page_client(user).post(f"/queue/mine-1-alice/{verb}").status_code == 403
    assert page_client(None).post("/queue/mine-1-alice/hold").status_code == 302  # to log in
    job = Job.objects.get(uid="mine-1-alice")
    assert (job.held, job.queue_boost) == (False, False)
    assert page_client(alice).get("/queue/mine-1-alice/hold").status_code == 405


def test_a_datacenter_the_user_may_not_use_is_a_400_naming_it(waiting: dict[str, Job], bob: User) -> None:
    Datacenter.objects.create(name="private", storage_root="/srv/private", all_users=False)
    for name in ("private", "nope", "x" * 300):
        html = html_of(page_client(bob), f"/queue/?datacenter={name}", status=400)
        assert 'data-testid="queue-error"' in html and "datacenter: unknown datacenter" in html
        assert "you may use: local<" in html


def test_several_datacenters_give_a_select_and_anonymous_users_log_in(
    waiting: dict[str, Job], alice: User
) -> None:
    Datacenter.objects.create(name="second", storage_root="/srv/second")
    html = html_of(page_client(alice), "/queue/?datacenter=second")
    assert '<option value="second" selected>' in html and 'data-testid="queue-empty"' in html
    answer = page_client(None).get("/queue/")
    assert answer.status_code == 302 and answer["Location"].startswith("/login/")


def test_the_table_refreshes_itself_alone(waiting: dict[str, Job], alice: User) -> None:
    html = html_of(page_client(alice), "/queue/?datacenter=local", HX_Request="true")
    assert html.lstrip().startswith("<div id=\"queue-table\"") or "<html" not in html
    assert 'hx-get="/queue/?datacenter=local"' in html and 'hx-trigger="every 5s"' in html


def test_the_job_page_shows_the_place_priority_and_estimate(
    waiting: dict[str, Job], local_dc: Datacenter, alice: User
) -> None:
    client = page_client(alice)
    html = html_of(client, "/jobs/mine-1-alice/")
    assert re.search(r'data-testid="queue-position">3<', html)
    assert "unknown (it waits behind a job whose end nothing here estimates" in html
    assert '(<span title="WaitingForCapacity">waiting for capacity</span>)' in html  # the code on hover
    assert re.search(r'data-testid="job-priority">normal <span class="muted">\(100\)', html)
    assert 'data-testid="job-attempt"' not in html
    # A finished job of 10 minutes, one at a time: the third waiting starts in about 30 minutes.
    now = timezone.now()
    done = make_job(local_dc, alice, "done", state=JobState.SUCCEEDED)
    ten_minutes = {"started_at": now - timedelta(minutes=20), "finished_at": now - timedelta(minutes=10)}
    Job.objects.filter(pk=done.pk).update(**ten_minutes)
    cache.clear()  # a finished job written here, not ended: the queue's fingerprint did not change
    place = html_of(client, "/jobs/mine-1-alice/place")
    assert re.search(r"in about (29|30)\xa0minutes", place) and 'hx-get="/jobs/mine-1-alice/place"' in place
    assert re.search(r"end <time[^>]*>in about (39|40)\xa0minutes", place) and "(from the average run here)" in place
    running = html_of(client, "/jobs/busy-alice/")  # admitted: not in the queue, no polling of its place
    assert 'data-testid="queue-position"' not in running and 'hx-get="/jobs/busy-alice/place"' not in running


def test_a_held_job_and_a_preempted_one_say_so_on_their_page(waiting: dict[str, Job], alice: User) -> None:
    Job.objects.filter(uid="mine-1-alice").update(held=True, reason="Held", message="held by an operator")
    Job.objects.filter(uid="mine-2-alice").update(attempt=2, reason="Preempted", preemptible=False)
    client = page_client(alice)
    assert "<strong>held</strong> by an operator until released" in html_of(client, "/jobs/mine-1-alice/")
    preempted = html_of(client, "/jobs/mine-2-alice/")
    assert 'data-testid="job-attempt">attempt 2: preempted once<' in preempted
    assert "(0, not preemptible)" in preempted
    Job.objects.filter(uid="mine-2-alice").update(attempt=4)
    assert "attempt 4: preempted 3 times" in html_of(client, "/jobs/mine-2-alice/")


def test_the_usage_page_sums_the_ledger_by_day_each_user_their_own(
    local_dc: Datacenter, alice: User, bob: User, carol: User
) -> None:
    yesterday = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=1)
    for owner, uid in ((alice, "fit-aaaaa"), (bob, "bobs-bbbbb")):
        UsageRecord.objects.create(owner=owner, datacenter=local_dc, job_uid=uid, job_name=uid[:-6],
                                   worker="trainer-0", cpu=2, memory=GI, gpu=0, started_at=yesterday,
                                   ended_at=yesterday + timedelta(hours=3))  # fmt: skip
    mine = html_of(page_client(alice), "/usage/")
    day = yesterday.date().isoformat()
    # Day, CPU core-hours asked and used, memory GiB-hours, peak GiB, GPU hours, storage GiB-days, jobs, workers.
    assert queue_rows(mine.replace("usage-row", "queue-row")) == [f"{day} 6.00 0.00 3.00 0.00 0.00 0.00 1 1"]
    assert queue_rows(mine.replace("usage-job-row", "queue-row")) == ["fit-aaaaa 6.00 0.00 3.00 0.00 0.00 1"]
    assert 'href="/jobs/fit-aaaaa/"' in mine and "bobs-bbbbb" not in mine
    assert 'href="/api/v1/usage?format=csv&amp;group_by=day"' in mine and 'href="/usage/"' in mine
    # The chart's figures, escaped into an attribute.
    assert f'data-chart="{{&quot;days&quot;: [&quot;{day}&quot;], &quot;asked&quot;: [6.0]' in mine
    everyone = html_of(page_client(carol), "/usage/")
    assert queue_rows(everyone.replace("usage-row", "queue-row")) == [f"{day} 12.00 0.00 6.00 0.00 0.00 0.00 2 2"]
    assert len(queue_rows(everyone.replace("usage-job-row", "queue-row"))) == 2
    assert 'data-testid="usage-empty"' in html_of(page_client(User.objects.create_user("dave")), "/usage/")
    assert page_client(None).get("/usage/").status_code == 302
