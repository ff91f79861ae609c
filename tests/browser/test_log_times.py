"""The log viewer in a real browser: each line's time, and "all workers" interleaved by time, live and older."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from paddlecloud.contract import logtimes

from datacenters.models import Datacenter
from jobs.models import Job, JobState, Role, Worker
from tests.browser.conftest import Page

pytestmark = pytest.mark.django_db(transaction=True)
T0 = 1_790_000_000.0
LINES = 300  # each; the viewer opens all workers at their last 200


class Launcher:
    """Writes a worker's log as the launcher does (log.txt plus log.times), at times the test chooses."""

    def __init__(self, job: Job, trainer: int) -> None:
        self.folder = Path(job.datacenter.storage_root, "home", job.owner.username, "jobs", job.name, "output",
                           job.uid, f"trainer_{trainer}")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.now = T0

    def write(self, at: float, text: str) -> None:
        self.now = at
        with (self.folder / "log.txt").open("ab", buffering=0) as log:
            times = logtimes.Recorder((self.folder / logtimes.TIMES_NAME).open("ab", buffering=0),
                                      log.seek(0, 2), clock=lambda: self.now)
            times.note(len(text.encode()))
            times.stop()
            log.write(text.encode())


def running_job(dc: Datacenter, owner: User) -> Job:
    job = Job.objects.create(owner=owner, datacenter=dc, name="fit", uid="fit-ab12c",
                             spec={"parallelism": 2, "pservers": 0, "entry": "python train.py"},
                             state=JobState.RUNNING)
    for index in range(2):
        Worker.objects.create(job=job, role=Role.TRAINER, index=index, state="running")
    return job


SHOWN = """() => Array.from(document.querySelectorAll('#log .line')).map(el => ({
  worker: el.dataset.worker, time: Number(el.dataset.time), stamp: el.querySelector('.ts').textContent,
  title: el.title, text: el.lastChild.nodeValue}))"""


def shown(page: Any) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = page.evaluate(SHOWN)
    return lines


def count_is(page: Any, n: int) -> None:
    page.wait_for_function(f"() => document.querySelectorAll('#log .line').length === {n}", timeout=15_000)


def test_all_workers_interleave_by_time_live_and_older_and_each_line_shows_its_time(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    launchers = [Launcher(job, 0), Launcher(job, 1)]
    for i in range(LINES):  # trainer 0 at even seconds, trainer 1 at odd ones
        for trainer, launcher in enumerate(launchers):
            launcher.write(T0 + 2 * i + trainer, f"trainer {trainer} step {i}\n")
    logged_in.goto(f"/jobs/{job.uid}/logs")
    page = logged_in.page
    page.select_option("#log-worker", "*")
    count_is(page, 400)
    lines = shown(page)
    assert [line["time"] for line in lines] == sorted(line["time"] for line in lines)
    assert [line["worker"] for line in lines[:4]] == ["trainer-0", "trainer-1", "trainer-0", "trainer-1"]
    first = lines[0]
    assert first["text"] == "trainer 0 step 100\n" and first["time"] == T0 + 200
    assert re.fullmatch(r"(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\.000 ", first["stamp"])  # the browser's local time
    # The full time on hover, in the page's one rule (static/js/portal.js): the browser's zone, named, with its offset.
    at = datetime.fromtimestamp(T0 + 200, UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert first["title"] == f"{at} UTC (UTC+00:00)"  # this browser runs in UTC (test_time_zones: another zone)
    assert page.locator("#log .line .who").first.text_content() == "[trainer-0] "

    # Live: trainer 1's line came first, so it shows first, whichever worker the page reads first.
    launchers[1].write(T0 + 1000, "trainer 1 live\n")
    launchers[0].write(T0 + 1000.5, "trainer 0 live\n")
    count_is(page, 402)
    assert [line["text"] for line in shown(page)[-2:]] == ["trainer 1 live\n", "trainer 0 live\n"]

    # Older text on demand, for every worker at once: still one sequence by time.
    page.click("#log-older")
    count_is(page, 2 * LINES + 2)
    lines = shown(page)
    assert [line["time"] for line in lines] == sorted(line["time"] for line in lines)
    assert lines[0]["text"] == "trainer 0 step 0\n" and lines[1]["text"] == "trainer 1 step 0\n"
    assert page.is_disabled("#log-older")
    logged_in.screenshot("logs-all-workers-times")

    page.uncheck("#log-times")
    assert not page.locator("#log .line .ts").first.is_visible()
    page.check("#log-times")
    assert page.locator("#log .line .ts").first.is_visible()
    assert logged_in.problems == []


def test_one_worker_shows_times_and_an_untimed_log_still_reads(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    folder = Launcher(job, 1).folder
    (folder / "log.txt").write_text("written before times were kept\n")
    Launcher(job, 0).write(T0, "timed\n")
    logged_in.goto(f"/jobs/{job.uid}/logs")
    page = logged_in.page
    count_is(page, 1)
    assert shown(page)[0]["time"] == T0
    page.select_option("#log-worker", "trainer-1")
    page.wait_for_function("() => document.getElementById('log').textContent.includes('before times')")
    assert shown(page)[0]["title"] == "" and shown(page)[0]["stamp"].strip() == ""
    assert logged_in.problems == []
