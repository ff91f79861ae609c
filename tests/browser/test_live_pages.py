"""Pages that follow the portal themselves: dashboard, quota and usage refresh; the log viewer follows the job."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job, JobState
from jobs.scheduling import ledger
from tests.browser.conftest import Page
from tests.browser.test_metrics_chart import running_job

pytestmark = pytest.mark.django_db(transaction=True)

NOT_RELOADED = "() => { window.__notReloaded = true; }"


def write_log(job: Job, worker: str, text: str) -> None:
    role, _, index = worker.partition("-")
    folder = Path(job.datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid,
                  f"{role}_{index}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log.txt").write_text(text)


def test_the_dashboard_shows_a_new_job_and_its_end_without_a_reload(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    page = logged_in.page
    logged_in.goto("/")
    page.evaluate(NOT_RELOADED)
    job = running_job(local_dc, alice)  # submitted elsewhere (paddlectl, another tab)
    page.wait_for_selector(f'[data-testid="recent-job"][data-job="{job.uid}"]', timeout=15_000)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    page.wait_for_selector('[data-testid="recent-job-state"]:text-is("succeeded")', timeout=15_000)
    assert page.evaluate("window.__notReloaded") is True and logged_in.problems == []


def test_the_quota_page_follows_the_jobs_in_use_without_a_reload(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    page = logged_in.page
    logged_in.goto("/quota/")
    page.evaluate(NOT_RELOADED)
    assert page.text_content('[data-testid="jobs-in-use"]') == "0"
    running_job(local_dc, alice)
    page.wait_for_selector('[data-testid="jobs-in-use"]:text-is("1")', timeout=15_000)
    assert page.evaluate("window.__notReloaded") is True and logged_in.problems == []


def test_the_usage_page_shows_a_released_jobs_use_without_a_reload(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    page = logged_in.page
    logged_in.goto("/usage/")
    page.evaluate(NOT_RELOADED)
    assert page.is_visible('[data-testid="usage-empty"]')
    job = running_job(local_dc, alice)
    now = timezone.now()
    job.workers.update(started_at=now - timedelta(hours=1))
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished_at=now, released=True)
    job.refresh_from_db()
    assert ledger.record(job)  # what the worker does as a job is released
    page.wait_for_selector('[data-testid="usage-row"]', timeout=30_000)  # polled every 10 s
    assert page.locator('[data-testid="usage-empty"]').count() == 0
    page.wait_for_selector("#usage-days canvas", timeout=10_000)  # the day chart is drawn after the swap too
    assert page.locator('[data-testid="usage-job-row"]').count() == 1
    logged_in.screenshot("usage-page")
    assert page.evaluate("window.__notReloaded") is True and logged_in.problems == []


def test_a_link_naming_a_worker_opens_the_log_viewer_on_it_over_the_tabs_choice(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    write_log(job, "trainer-0", "from trainer 0\n")
    write_log(job, "trainer-1", "from trainer 1\n")
    page = logged_in.page
    logged_in.goto(f"/jobs/{job.uid}/logs")
    page.select_option("#log-worker", "*")  # remembered for this tab
    logged_in.goto(f"/jobs/{job.uid}/logs?worker=trainer-1")  # the admin's link to trainer-1's log
    page.wait_for_function("() => document.getElementById('log').textContent.includes('from trainer 1')")
    assert page.input_value("#log-worker") == "trainer-1" and "from trainer 0" not in (page.text_content("#log") or "")
    assert logged_in.problems == []


def test_the_log_viewer_keeps_its_worker_across_a_kill_and_stops_following_once_the_job_ended(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    write_log(job, "trainer-0", "from trainer 0\n")
    text = "from trainer 1\n" + "".join(f"line {i}\n" for i in range(30_000))  # more than the viewer opens with
    write_log(job, "trainer-1", text)
    page = logged_in.page
    logged_in.goto(f"/jobs/{job.uid}/#logs")
    page.select_option("#log-worker", "trainer-1")
    page.wait_for_function("() => document.getElementById('log').textContent.includes('line 29999')")
    assert page.is_visible('[data-testid="log-follow"]')
    # Only the tail is loaded: the status says so while following, not only once the job ended.
    following = "() => document.getElementById('log-status').textContent.startsWith('following: the last ')"
    page.wait_for_function(following)
    assert f"of {len(text) / 1024:.0f} KiB" in (page.text_content('[data-testid="log-status"]') or "")

    page.click('[data-tab="overview"]')
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click('[data-testid="kill"]')  # the page reloads after the kill, on the tab last open
    assert page.get_attribute('[data-tabs]', "data-open") == "overview"
    page.click('[data-tab="logs"]')
    assert page.input_value("#log-worker") == "trainer-1"
    page.wait_for_function("() => document.getElementById('log').textContent.includes('line 29999')")
    assert "from trainer 0" not in page.text_content("#log")

    Job.objects.filter(pk=job.pk).update(released=True)  # what the worker's kill_job does once all stopped
    page.wait_for_selector('[data-testid="log-follow"]', state="hidden", timeout=15_000)
    status = page.text_content('[data-testid="log-status"]') or ""
    assert status.startswith("ended: the last ") and f"of {len(text) / 1024:.0f} KiB" in status, status
    for _ in range(3):  # 256 KiB a click
        page.click('[data-testid="log-older"]')
        page.wait_for_function("() => !document.getElementById('log-older').disabled || "
                               "document.getElementById('log').textContent.includes('from trainer 1')")
        if "from trainer 1" in (page.text_content("#log") or ""):
            break
    assert page.text_content('[data-testid="log-status"]') == "ended: the whole log is shown"
    assert logged_in.problems == []


def test_a_paused_log_viewer_ends_with_the_job_and_loads_the_rest(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    write_log(job, "trainer-0", "first\n")
    page = logged_in.page
    logged_in.goto(f"/jobs/{job.uid}/#logs")
    page.wait_for_function("() => document.getElementById('log-status').textContent.startsWith('following: ')")
    page.click('[data-testid="log-follow"]')
    assert page.text_content('[data-testid="log-status"]') == "paused: the whole log is shown"

    write_log(job, "trainer-0", "first\nlast words\n")  # written while paused, then the job ends
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED, released=True)
    page.wait_for_selector('[data-testid="log-follow"]', state="hidden", timeout=15_000)  # no Follow once ended
    assert page.text_content('[data-testid="log-status"]') == "ended: the whole log is shown"
    assert "last words" in (page.text_content("#log") or "")
    assert logged_in.problems == []
