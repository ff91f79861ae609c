"""The queue page in Chromium: others' job names never reach the page, it follows new jobs, staff hold one."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from tests.browser.conftest import Page, login
from tests.browser.test_live_pages import NOT_RELOADED
from tests.jobs.test_queue_api import make_job
from tests.pages.test_queue_page import queued_world

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_user_sees_the_queue_without_others_names_and_new_jobs_without_a_reload(
    logged_in: Page, local_dc: Datacenter, alice: User, bob: User, carol: User
) -> None:
    queued_world(local_dc, alice, bob, carol)
    page = logged_in.page
    logged_in.goto("/queue/")
    page.evaluate(NOT_RELOADED)
    rows = page.locator('[data-testid="queue-row"]')
    assert rows.count() == 4
    assert page.locator('[data-testid="queue-position"]').all_text_contents() == ["1", "2", "3", "4"]
    content = page.content()
    assert "bobs-secret-run" not in content and "carols-urgent" not in content
    assert page.locator("text=another user's job").count() == 2
    make_job(local_dc, alice, "mine-3")  # submitted elsewhere (paddlectl): the table shows it on its next poll
    page.wait_for_selector('[data-testid="queue-row"][data-job="mine-3-alice"]', timeout=15_000)
    assert "bobs-secret-run" not in page.content()
    page.click('a[href="/jobs/mine-1-alice/"]')
    page.wait_for_selector('[data-testid="job-place"] [data-testid="queue-position"]')
    assert page.text_content('[data-testid="job-priority"]').startswith("normal")
    logged_in.goto("/queue/")
    page.wait_for_load_state("networkidle")
    path = logged_in.screenshot("queue-user")
    assert path.stat().st_size > 0
    assert logged_in.problems == []


def test_staff_hold_a_job_from_the_page(
    browser: Any, live_server: Any, local_dc: Datacenter, alice: User, bob: User, carol: User
) -> None:
    queued_world(local_dc, alice, bob, carol)
    staff = login(browser, live_server.url, carol)
    staff.goto("/queue/")
    page = staff.page
    assert page.locator('[data-testid="queue-row"][data-job="bobs-secret-run-bob"]').count() == 1
    page.click('[data-job="mine-1-alice"] [data-testid="hold"]')
    page.wait_for_selector("text=Job mine-1 of alice held.")
    assert page.locator('[data-job="mine-1-alice"] [data-testid="queue-position"]').text_content() == "held"
    assert page.locator('[data-job="mine-1-alice"] [data-testid="release"]').count() == 1
    staff.screenshot("queue-staff")
    assert staff.problems == []
    page.context.close()
