"""The loss chart's y axis: linear by default; a log scale on demand for a metric spanning orders of magnitude."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from tests.browser.conftest import Page
from tests.browser.test_metrics_chart import append_points, running_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_loss_spanning_decades_can_be_drawn_on_a_log_scale(logged_in: Page, local_dc: Datacenter,
                                                             alice: User) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(0, 2000), acc=0.5)  # loss 1/(step+1): from 1 down to 0.0005
    logged_in.goto(f"/jobs/{job.uid}/")
    page = logged_in.page
    loss, acc = 'svg[data-metric="loss"]', 'svg[data-metric="acc"]'
    page.wait_for_selector(loss, state="attached", timeout=15_000)
    assert page.get_attribute(loss, "data-scale") == "linear"
    assert page.locator('input[data-metric="acc"]').count() == 0  # a flat metric offers no log scale
    top = page.locator(f"{loss} text").first.text_content()
    page.check('input[data-metric="loss"]')
    page.wait_for_selector(f'{loss}[data-scale="log"]', state="attached")
    assert page.get_attribute(acc, "data-scale") == "linear"
    assert page.locator(f"{loss} text").first.text_content() == top == "1.000"  # the axis still reads in values
    logged_in.screenshot("metrics-log-scale")
    assert logged_in.problems == []
