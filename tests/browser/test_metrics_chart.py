"""The job page's loss curve in a real browser (uPlot): a line per trainer, growing as the job runs, names as text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job, JobState, Role, Worker
from jobs.spec import requested
from tests.browser.conftest import Page

pytestmark = pytest.mark.django_db(transaction=True)
HTML_NAME = '<img src=x onerror="document.title=1">'


def running_job(dc: Datacenter, owner: User) -> Job:
    spec = {"parallelism": 2, "pservers": 0, "entry": "python train.py"}
    cpu, memory, gpu = requested(spec)
    job = Job.objects.create(owner=owner, datacenter=dc, name="fit", uid="fit-ab12c", spec=spec,
                             state=JobState.RUNNING, cpu_request=cpu, memory_request=memory, gpu_request=gpu,
                             admitted_at=timezone.now())  # running: the scheduler admitted it
    for index in range(2):
        Worker.objects.create(job=job, role=Role.TRAINER, index=index, state="running")
    return job


def append_points(job: Job, trainer: int, steps: range, every: float = 0.0, **extra: float) -> None:
    """`every`: the seconds between two steps (each point's time); 0: all at the epoch."""
    folder = Path(job.datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid,
                  f"trainer_{trainer}")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "metrics.jsonl").open("a") as out:
        for step in steps:
            values = {"loss": 1.0 / (step + 1) + trainer * 0.05, **extra}
            out.write(json.dumps({"step": step, "time": 1_700_000_000.0 + step * every, "values": values}) + "\n")


def test_the_loss_curve_has_a_line_per_trainer_and_grows_without_reload(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(0, 50))
    append_points(job, 1, range(0, 40))
    logged_in.goto(f"/jobs/{job.uid}/#metrics")
    page = logged_in.page
    loss = 'figure[data-metric="loss"]'
    page.wait_for_selector(f"{loss}[data-points-trainer-0][data-points-trainer-1] canvas", timeout=15_000)
    assert page.get_attribute(loss, "data-points-trainer-0") == "50"
    assert page.eval_on_selector_all(f"{loss} .u-legend .u-series .u-label", "ls => ls.map(l => l.textContent)") == [
        "step", "trainer-0", "trainer-1"]  # one line per trainer
    append_points(job, 1, range(40, 80))  # trainer 1 goes on; the page picks it up by cursor
    page.wait_for_selector(f'{loss}[data-points-trainer-1="80"]', state="attached", timeout=15_000)
    logged_in.screenshot("metrics-chart")
    assert logged_in.problems == []


def test_a_metric_named_with_html_shows_as_text(logged_in: Page, local_dc: Datacenter, alice: User) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(3), **{HTML_NAME: 1.0})
    logged_in.goto(f"/jobs/{job.uid}/#metrics")
    page = logged_in.page
    page.wait_for_selector(".metric-name", timeout=15_000)
    names = page.eval_on_selector_all(".metric-name", "els => els.map(e => e.textContent)")
    assert HTML_NAME in names
    assert page.locator("#metrics img").count() == 0 and page.title() != "1"
    assert logged_in.problems == []


def test_the_charts_share_one_cursor_ticks_read_plainly_and_smoothing_keeps_the_raw_line(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(0, 40), accuracy=0.75)
    logged_in.goto(f"/jobs/{job.uid}/#metrics")
    page = logged_in.page
    loss, accuracy = 'figure[data-metric="loss"]', 'figure[data-metric="accuracy"]'
    page.wait_for_selector(f"{accuracy} canvas", timeout=15_000)
    value = f"{accuracy} .u-legend .u-series:nth-child(2) .u-value"
    assert page.inner_text(value) in ("–", "--")  # no cursor on the page yet
    # Hovering the loss chart puts the accuracy chart's cursor at the same step; its value reads 0.75, not
    # 0.7500 (the axes' ticks go through the same formatting).
    page.hover(f"{loss} .u-over", position={"x": 150, "y": 40})
    page.wait_for_function(f"document.querySelector('{value}').textContent === '0.75'", timeout=5_000)
    # Smoothing draws the raw values faintly behind: the legend still lists each trainer once.
    page.eval_on_selector("#metrics-smoothing", "el => { el.value = '0.9'; el.dispatchEvent(new Event('input')); }")
    shown = page.eval_on_selector_all(
        f"{loss} .u-legend .u-series", "rows => rows.filter(r => r.style.display !== 'none').map(r => r.textContent)"
    )
    assert len(shown) == 2 and "raw" not in " ".join(shown), shown  # step and trainer-0
    assert page.eval_on_selector_all(f"{loss} .u-legend .u-series", "rows => rows.length") == 3  # and its raw line
    logged_in.screenshot("metrics-linked")
    assert logged_in.problems == []


def test_the_x_axis_may_be_the_wall_time_or_the_time_since_the_run_started(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    """One step every 3 s for 100 steps (5 minutes): the axis reads steps, then durations since the first point, then
    wall times; the cursor's x in the legend says the same."""
    job = running_job(local_dc, alice)
    append_points(job, 0, range(0, 100), every=3.0)
    logged_in.goto(f"/jobs/{job.uid}/#metrics")
    page = logged_in.page
    loss = 'figure[data-metric="loss"]'
    page.wait_for_selector(f"{loss} canvas", timeout=15_000)
    x_value = f"{loss} .u-legend .u-series:first-child .u-value"
    page.hover(f"{loss} .u-over", position={"x": 200, "y": 40})
    assert page.inner_text(x_value).isdigit()  # a step
    page.select_option("#metrics-x", "relative")
    page.wait_for_selector(f'{loss}[data-x-axis="relative"] canvas', timeout=5_000)
    page.hover(f"{loss} .u-over", position={"x": 210, "y": 40})
    since = page.inner_text(x_value)
    assert re.fullmatch(r"\d+m \d\ds|\d+ s", since), since  # e.g. 2m 15s: a duration since the first point
    assert page.inner_text(f"{loss} .u-legend .u-series:first-child .u-label") == "since start"
    page.select_option("#metrics-x", "wall")
    page.wait_for_selector(f'{loss}[data-x-axis="wall"] canvas', timeout=5_000)
    page.hover(f"{loss} .u-over", position={"x": 220, "y": 40})
    wall = page.inner_text(x_value)
    assert re.search(r"\d{1,2}:\d\d", wall), wall  # a clock time in the browser's zone (uPlot's time scale)
    logged_in.screenshot("metrics-wall-time")
    assert logged_in.problems == []
