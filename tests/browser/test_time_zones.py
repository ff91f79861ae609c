"""One time zone said everywhere: a browser in Asia/Shanghai sees the job page's times, its timeline, its workers
and its log in its own zone, named, where the server wrote UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs import events
from jobs.models import EventKind, Job, Worker
from tests.browser.conftest import login
from tests.browser.test_log_times import Launcher, running_job

pytestmark = pytest.mark.django_db(transaction=True)
STARTED = datetime(2026, 11, 27, 20, 53, 51, tzinfo=UTC)  # 04:53:51 the next day in Shanghai (UTC+8)
SHOWN = "() => Array.from(document.querySelectorAll('time[data-local]')).map(el => [el.textContent, el.title])"


def test_a_browser_in_another_zone_sees_one_zone_named_on_the_job_page_and_its_log(
    browser: Any, live_server: Any, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    Job.objects.filter(pk=job.pk).update(created_at=STARTED - timedelta(seconds=9), started_at=STARTED)
    Worker.objects.filter(job=job).update(started_at=STARTED)
    events.record(job.pk, EventKind.ADMITTED, "admitted")
    job.events.update(time=STARTED)
    Launcher(job, 0).write(STARTED.timestamp(), "first line\n")
    page = login(browser, live_server.url, alice, timezone_id="Asia/Shanghai")
    try:
        page.goto(f"/jobs/{job.uid}/")
        times: list[list[str]] = page.page.evaluate(SHOWN)
        texts = [text for text, _ in times]
        assert "2026-11-28 04:53:51 GMT+8" in texts  # Started, in the page's summary
        assert "04:53:51 GMT+8" in texts  # the workers' and the timeline's times of day
        assert "2026-11-28 04:53:42 GMT+8" in texts  # Queued
        assert all(text.endswith("GMT+8") for text in texts) and not any("UTC" in text for text in texts), texts
        assert all(title.endswith("GMT+8 (UTC+08:00)") for _, title in times)
        page.screenshot("job-page-in-shanghai")

        page.goto(f"/jobs/{job.uid}/logs")
        page.page.wait_for_selector("#log .line .ts")
        stamp = page.page.locator("#log .line .ts").first.text_content() or ""
        assert stamp.strip().endswith("04:53:51.000"), stamp  # the log's clock: the same zone as the page
        label = page.page.locator("label:has(#log-times)").text_content() or ""
        assert "(GMT+8)" in label, label
        assert page.problems == []
    finally:
        page.page.context.close()


def test_without_javascript_the_times_say_utc(
    browser: Any, live_server: Any, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    Job.objects.filter(pk=job.pk).update(started_at=STARTED)
    page = login(browser, live_server.url, alice, timezone_id="Asia/Shanghai", java_script_enabled=False)
    try:
        page.goto(f"/jobs/{job.uid}/")
        started = page.page.locator('[data-testid="started"]').text_content() or ""
        assert started.strip() == "2026-11-27 20:53:51 UTC"  # the server's fallback names its zone
    finally:
        page.page.context.close()


def test_the_server_writes_utc_for_every_zone_the_portal_runs_in(settings: Any) -> None:
    from portal.templatetags.times import when  # noqa: PLC0415 - the filter itself, without a page

    settings.TIME_ZONE = "Asia/Tokyo"
    with timezone.override("Asia/Tokyo"):
        html = str(when(STARTED.astimezone(timezone.get_current_timezone()), "minute"))
    assert html == ('<time datetime="2026-11-27T20:53:51Z" data-local="minute" title="2026-11-27 20:53:51 UTC">'
                    "2026-11-27 20:53 UTC</time>")  # fmt: skip
    assert when(None) == ""
