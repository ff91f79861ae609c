"""The loss chart's controls in a real browser: hover values, log scale, smoothing, zoom, other runs overlaid."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job, JobState
from tests.browser.conftest import Page
from tests.browser.test_metrics_chart import append_points, running_job

pytestmark = pytest.mark.django_db(transaction=True)
LOSS = 'figure[data-metric="loss"]'


def hover_value(page: Any, x_fraction: float, series: int = 1) -> str:
    """Move the mouse over the loss plot at x_fraction of its width; the legend's value of that series."""
    plot = page.locator(f"{LOSS} .u-over")
    plot.scroll_into_view_if_needed()  # the mouse moves within the window only
    box = plot.bounding_box()
    page.mouse.move(box["x"] + 1 + (box["width"] - 3) * x_fraction, box["y"] + box["height"] / 2)
    # uPlot moves its cursor on the next animation frame: wait until the legend shows a step.
    page.wait_for_function(f"() => !['–', '--', ''].includes(document.querySelector('{LOSS} .u-legend .u-value')"
                           ".textContent.trim())", timeout=5_000)
    # The legend's rows as shown: a smoothed line's raw shadow has a row of its own, not shown.
    return str(page.locator(f"{LOSS} .u-legend .u-series:visible").nth(series).locator(".u-value").text_content())


def test_the_chart_shows_a_hover_value_and_zooms(logged_in: Page, local_dc: Datacenter, alice: User) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(0, 100))  # loss 1/(step+1)
    logged_in.goto(f"/jobs/{job.uid}/#metrics")
    page = logged_in.page
    page.wait_for_selector(f"{LOSS} canvas", timeout=15_000)
    assert hover_value(page, 0.0) == "1"  # step 0: 1/(0+1), with no trailing zeros
    assert hover_value(page, 1.0) == "0.01"  # the last step, 99: 1/100
    middle = hover_value(page, 0.5)
    assert middle not in ("1", "0.01", "–")
    step = page.locator(f"{LOSS} .u-legend .u-series").nth(0).locator(".u-value").text_content()
    assert step is not None and 40 <= float(step) <= 60
    box = page.locator(f"{LOSS} .u-over").bounding_box()  # in view: hover_value scrolled it there
    assert box is not None
    y = box["y"] + box["height"] / 2  # drag across the first tenth: zoom in on steps 0-9
    page.mouse.move(box["x"] + 1, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.1, y, steps=5)
    page.mouse.up()
    page.mouse.move(box["x"] + box["width"] - 1, y)
    zoomed_step = page.locator(f"{LOSS} .u-legend .u-series").nth(0).locator(".u-value").text_content()
    assert zoomed_step is not None and float(zoomed_step) <= 11
    logged_in.screenshot("metrics-hover")
    assert logged_in.problems == []


def test_log_scale_and_smoothing(logged_in: Page, local_dc: Datacenter, alice: User) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(0, 2000), acc=-0.5)  # loss 1/(step+1): from 1 down to 0.0005
    logged_in.goto(f"/jobs/{job.uid}/#metrics")
    page = logged_in.page
    page.wait_for_selector(f"{LOSS} canvas", timeout=15_000)
    assert page.get_attribute(LOSS, "data-scale") == "linear"
    assert page.locator('input[data-metric="acc"]').count() == 0  # a negative metric offers no log scale
    page.check('input[data-metric="loss"]')
    page.wait_for_selector(f'{LOSS}[data-scale="log"] canvas')
    assert page.get_attribute('figure[data-metric="acc"]', "data-scale") == "linear"
    raw = hover_value(page, 0.0)
    page.fill("#metrics-smoothing", "0.9")  # an EMA: the first value stays, the next ones lag behind
    page.dispatch_event("#metrics-smoothing", "input")
    assert page.text_content("#metrics-smoothing-value") == "0.90"
    assert hover_value(page, 0.0) == raw == "1"
    assert float(hover_value(page, 0.01)) > 1 / 21  # smoothed: above the raw loss at about step 20
    logged_in.screenshot("metrics-log-scale")
    assert logged_in.problems == []


def test_another_run_of_the_same_name_can_be_overlaid(logged_in: Page, local_dc: Datacenter, alice: User) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(0, 30))
    earlier = Job.objects.create(owner=alice, datacenter=local_dc, name=job.name, uid="fit-0ld00", spec=job.spec,
                                 state=JobState.SUCCEEDED, cpu_request=job.cpu_request,
                                 memory_request=job.memory_request, gpu_request=0, finished_at=timezone.now())
    append_points(earlier, 0, range(0, 60))
    logged_in.goto(f"/jobs/{job.uid}/#metrics")
    page = logged_in.page
    page.wait_for_selector(f"{LOSS} canvas", timeout=15_000)
    page.check('[data-testid="metric-runs"] input[data-uid="fit-0ld00"]')
    labels = f"{LOSS} .u-legend .u-series .u-label"
    page.wait_for_function(f"() => document.querySelectorAll('{labels}').length === 3", timeout=15_000)
    assert page.eval_on_selector_all(labels, "ls => ls.map(l => l.textContent)") == [
        "step", "trainer-0", "fit-0ld00 trainer-0"]
    assert hover_value(page, 1.0, series=2) == "0.01667"  # the earlier run's last step, 59: 1/60
    logged_in.screenshot("metrics-overlay")
    page.uncheck('[data-testid="metric-runs"] input[data-uid="fit-0ld00"]')
    page.wait_for_function(f"() => document.querySelectorAll('{labels}').length === 2")
    assert logged_in.problems == []
