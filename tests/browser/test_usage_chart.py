"""The job page's resource-use charts in a real browser (uPlot): CPU and memory, a line per worker, from the
portal's own samples (GET /api/v1/jobs/<uid>/usage)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Worker
from tests.browser.conftest import Page
from tests.browser.test_metrics_chart import running_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_cpu_and_memory_are_charted_with_a_line_per_worker(logged_in: Page, local_dc: Datacenter, alice: User) -> None:
    job = running_job(local_dc, alice)
    now = timezone.now().timestamp()
    for worker in Worker.objects.filter(job=job):
        history = [[now - 10 * (30 - i), 0.5 + worker.index, (200 + i) << 20] for i in range(30)]
        Worker.objects.filter(pk=worker.pk).update(usage_history=history)
    logged_in.goto(f"/jobs/{job.uid}/#resources")
    page = logged_in.page
    page.wait_for_selector('#usage figure[data-testid="usage-chart"] canvas', timeout=15_000)
    assert page.locator('#usage figure[data-testid="usage-chart"]').count() == 2  # CPU and memory
    labels = page.eval_on_selector_all(
        "#usage figure:first-of-type .u-legend .u-series .u-label", "ls => ls.map(l => l.textContent)"
    )
    assert labels == ["time", "trainer-0", "trainer-1"]
    assert page.locator("#usage-empty").is_hidden()
    logged_in.screenshot("usage-chart")
    assert logged_in.problems == []


def test_each_roles_limit_is_a_dashed_line_and_the_two_charts_share_the_cursor(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    job.spec = {**job.spec, "cpu": "1", "memory": "512Mi"}
    job.save(update_fields=["spec"])
    now = timezone.now().timestamp()
    for worker in Worker.objects.filter(job=job):
        history = [[now - 10 * (30 - i), 0.5, (400 + i) << 20] for i in range(30)]
        Worker.objects.filter(pk=worker.pk).update(usage_history=history)
    logged_in.goto(f"/jobs/{job.uid}/#resources")
    page = logged_in.page
    memory = '#usage figure[data-resource="memory"]'
    page.wait_for_selector(f"{memory} canvas", timeout=15_000)
    assert page.get_attribute(memory, "data-limits") == "trainer"
    labels = page.eval_on_selector_all(f"{memory} .u-legend .u-series .u-label", "ls => ls.map(l => l.textContent)")
    assert labels == ["time", "trainer-0", "trainer-1", "trainer limit"]
    assert "sampled every 10 s; dashed: the limit" in page.inner_text(f"{memory} figcaption")
    # Hovering the CPU chart moves the memory chart's cursor: its legend shows that moment's values.
    value = f"{memory} .u-legend .u-series:nth-child(2) .u-value"
    page.hover('#usage figure[data-resource="cpu"] .u-over', position={"x": 200, "y": 50})
    page.wait_for_function(f"document.querySelector('{value}').textContent.includes('MiB')", timeout=5_000)
    limit = page.inner_text(f"{memory} .u-legend .u-series:nth-child(4) .u-value")
    assert limit == "512.0 MiB", limit
    # The moment in the page's one time rule (portal.js), not raw ISO: portal.js is deferred, this chart waits.
    moment = page.inner_text(f"{memory} .u-legend .u-series:nth-child(1) .u-value")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+", moment), moment
    logged_in.screenshot("usage-chart-limits")
    assert logged_in.problems == []
