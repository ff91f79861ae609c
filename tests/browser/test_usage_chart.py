"""The job page's resource-use charts in a real browser (uPlot): CPU and memory, a line per worker, from the
portal's own samples (GET /api/v1/jobs/<uid>/usage)."""

from __future__ import annotations

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
    logged_in.goto(f"/jobs/{job.uid}/")
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
