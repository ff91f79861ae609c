"""The job list in a real browser: a column header sorts it server-side, a second click the other way, pages and all."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job
from tests.browser.conftest import Page, login
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db(transaction=True)

STATES = ["succeeded", "failed", "running", "queued", "killed"]


def cells(page: Page, testid: str) -> list[str]:
    found: list[str] = page.page.eval_on_selector_all(
        f"[data-testid={testid}]", "cells => cells.map(c => c.textContent.trim())"
    )
    return found


def test_the_job_list_sorts_by_state_and_by_datacenter_either_way_across_pages(
    browser: Any, live_server: Any, alice: User, local_dc: Datacenter
) -> None:
    other = Datacenter.objects.create(name="zeta", engine=local_dc.engine, storage_root=local_dc.storage_root)
    now = timezone.now()
    for number in range(60):  # more than a page (25)
        job = make_job(other if number % 4 == 0 else local_dc, alice, f"run{number}")
        Job.objects.filter(pk=job.pk).update(state=STATES[number % 5], created_at=now - timedelta(minutes=number))
    for width, label in ((1366, "desktop"), (390, "phone")):
        user = login(browser, live_server.url, alice, viewport={"width": width, "height": 900})
        page = user.page
        user.goto("/jobs/")
        with page.expect_navigation():
            page.click("[data-testid=sort-state]")
        states = cells(user, "job-row-state")
        assert states == sorted(states) and states[0] == "failed" and len(states) == 25
        assert page.get_attribute("th:has([data-testid=sort-state])", "aria-sort") == "ascending"
        user.screenshot(f"job-list-sorted-by-state-{label}")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        with page.expect_navigation():
            page.click("[data-testid=sort-state]")  # the other way
        assert cells(user, "job-row-state")[0] == "succeeded"
        with page.expect_navigation():
            page.click("text=older")  # page 2 of the same order
        second = cells(user, "job-row-state")
        assert second == sorted(second, reverse=True) and len(second) == 25
        with page.expect_navigation():
            page.click("[data-testid=sort-datacenter]")
        rows = page.eval_on_selector_all(
            "[data-testid=job-row]", "rows => rows.map(r => r.children[6].textContent.trim())"
        )
        assert rows == ["local"] * 25  # local before zeta, 45 of them
        assert user.problems == []
        page.context.close()
