"""Worker counts on the job list and the job page read right after the job ended, not only while it runs."""

from __future__ import annotations

import re

from django.contrib.auth.models import User

from datacenters.models import Datacenter
from jobs.models import JobState
from tests.pages.test_pages import make_job, page_client


def cells(html: str, testid: str) -> list[str]:
    return [re.sub(r"\s+", " ", c).strip() for c in re.findall(rf'data-testid="{testid}">(.*?)</td>', html, re.S)]


def test_the_list_shows_ready_counts_while_running_and_how_it_ended_after(
    local_dc: Datacenter, alice: User, carol: User
) -> None:
    make_job(local_dc, alice, trainers_succeeded=2, pservers_running=0)
    make_job(local_dc, alice, name="run", uid="run-aaaaa", state=JobState.RUNNING, released=False,
             trainers_running=1, pservers_running=1)
    make_job(local_dc, alice, name="bad", uid="bad-bbbbb", state=JobState.FAILED, trainers_succeeded=1,
             trainers_failed=1)
    html = page_client(alice).get("/jobs/").content.decode()
    assert cells(html, "job-row-trainers") == ["1/2 succeeded, 1 failed", "1/2 ready", "2/2 succeeded"]
    assert cells(html, "job-row-pservers") == ["1, ended", "1/1 ready", "1, ended"]
    assert "0/1" not in html


def test_the_job_page_shows_no_pserver_pending_or_running_count_after_the_end(local_dc: Datacenter,
                                                                             alice: User) -> None:
    job = make_job(local_dc, alice)
    html = page_client(alice).get(f"/jobs/{job.uid}/").content.decode()
    assert 'title="stopped when the job ended"' in html


def test_the_job_page_keeps_polling_until_the_job_is_released_so_delete_shows_up(local_dc: Datacenter,
                                                                                alice: User) -> None:
    job = make_job(local_dc, alice, released=False)
    live = f'hx-get="/jobs/{job.uid}/live"'
    assert live in page_client(alice).get(f"/jobs/{job.uid}/live").content.decode()
    job.released = True
    job.save(update_fields=["released"])
    final = page_client(alice).get(f"/jobs/{job.uid}/live").content.decode()
    assert live not in final and 'data-testid="delete"' in final
