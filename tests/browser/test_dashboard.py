"""The dashboard in a real browser, with a real Celery worker and real PaddlePaddle on the local engine.

A researcher's day: submit the example from the form (package uploaded from the browser), watch the
list and the job page go live to succeeded without a reload, read the logs, kill a long job, clone it,
upload a folder with the progress bar. Text from jobs and file names shows as text; the CSP holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.models import Job
from tests.browser import jobdump
from tests.browser.conftest import Page
from tests.browser.test_metrics_chart import append_points, running_job
from tests.jobs.conftest import EXAMPLES
from tests.wait import wait_for
from tests.workers import WorkerProcess, start_worker

pytestmark = [pytest.mark.paddle, pytest.mark.celery, pytest.mark.django_db(transaction=True)]

HTML = "<img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
TRAIN_TIMEOUT_MS = 300_000  # the first Paddle job of a machine installs the runtime

# Records every distinct text the selector shows, from inside the page: the list and the job page
# refresh themselves, and a state that lasts less than a Python poll would be missed otherwise.
RECORD_STATES = """selector => {
  window.__notReloaded = true;
  window.__states = [];
  setInterval(() => {
    const el = document.querySelector(selector);
    const text = el ? el.textContent.trim() : null;
    if (text && window.__states[window.__states.length - 1] !== text) window.__states.push(text);
  }, 100);
}"""

LAST_STATE_SUCCEEDED = "() => window.__states[window.__states.length - 1] === 'succeeded'"


@pytest.fixture
def worker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = start_worker(tmp_path, beat=True, concurrency=2)
    yield process
    process.stop()


def watch(page: Page, path: str, selector: str) -> None:
    page.goto(path)
    page.page.evaluate(RECORD_STATES, selector)


def seen(page: Page) -> dict[str, Any]:
    result: dict[str, Any] = page.page.evaluate("({kept: window.__notReloaded === true, states: window.__states})")
    return result


def second_page(logged_in: Page) -> Page:
    return Page(logged_in.page.context.new_page(), logged_in.url)


def test_the_example_submitted_from_the_form_goes_live_to_succeeded_with_logs_and_a_loss_curve(
    logged_in: Page, local_dc: Datacenter, alice: User, worker: WorkerProcess
) -> None:
    listing = second_page(logged_in)
    watch(listing, "/jobs/", '[data-testid="job-row-state"]')  # empty now: the new row must appear by itself

    logged_in.goto("/jobs/new")
    page = logged_in.page
    page.bring_to_front()  # a background tab gets no file chooser
    page.fill("#id_jobname", "fit")
    page.select_option("#id_datacenter", "local")
    page.set_input_files("#package-upload", str(EXAMPLES / "fit_a_line"))  # a folder, as the browser sends it
    page.wait_for_function("() => document.getElementById('package-status').textContent.startsWith('uploaded')",
                           timeout=60_000)
    assert page.input_value("#id_package") == "/pfs/local/home/alice/jobs/fit"
    assert page.eval_on_selector("#package-progress", "p => p.value") == 100
    page.fill("#id_entry", "python train.py")
    page.fill("#id_parallelism", "2")
    page.fill("#id_pservers", "2")
    page.fill("#id_passes", "20")  # a few seconds of training: the list, polled every 2-5 s, sees it run
    page.click('[data-testid="submit"]')
    page.wait_for_url("**/jobs/fit-*/")
    uid = page.url.rstrip("/").rsplit("/", 1)[-1]
    page.evaluate(RECORD_STATES, '[data-testid="job-state"]')

    ended = "['failed', 'killed'].includes(document.getElementById('job-state').textContent.trim())"

    def until(condition: str, timeout: float = TRAIN_TIMEOUT_MS) -> None:
        """Wait for a condition in the page, giving up at once when the job has failed; say all that was known."""
        try:
            page.wait_for_function(f"() => ({condition}) || {ended}", timeout=timeout)
        except PlaywrightTimeout:
            raise AssertionError(f"timed out after {timeout / 1000:.0f} s waiting for {condition}\n"
                                 + jobdump.describe(uid, page, worker.log())) from None
        job = Job.objects.get(uid=uid)
        assert job.state not in ("failed", "killed"), f"{condition}: the job ended\n" + jobdump.describe(
            uid, page, worker.log())

    until("document.getElementById('job-state').textContent.trim() === 'running'")
    until("document.querySelectorAll('[data-testid=worker-row]').length === 4", 60_000)
    until("document.getElementById('log').textContent.includes('loss')")
    until("document.querySelector('figure[data-metric=loss][data-points-trainer-0][data-points-trainer-1]')")
    until("document.getElementById('job-state').textContent.trim() === 'succeeded'")
    job = Job.objects.get(uid=uid)
    assert (job.state, job.exit_code) == ("succeeded", 0), job.message

    page.wait_for_selector('[data-testid="delete"]', timeout=15_000)  # once the job is released
    assert page.locator('[data-testid="kill"]').count() == 0
    rows = page.eval_on_selector_all('[data-testid="worker-row"]', "rows => rows.map(r => r.dataset.worker)")
    assert sorted(rows) == ["pserver-0", "pserver-1", "trainer-0", "trainer-1"]
    assert page.text_content("#job-exit") == "0"
    for trainer in (0, 1):
        assert int(page.get_attribute('figure[data-metric="loss"]', f"data-points-trainer-{trainer}") or 0) >= 2
    page.wait_for_function(LAST_STATE_SUCCEEDED, timeout=5_000)
    states = seen(logged_in)
    assert states["kept"] and states["states"][-1] == "succeeded" and "running" in states["states"], states
    logged_in.screenshot("job-page-chart")

    listing.page.wait_for_function(LAST_STATE_SUCCEEDED, timeout=15_000)
    listed = seen(listing)
    assert listed["kept"] and "running" in listed["states"] and listed["states"][-1] == "succeeded", listed
    listing.screenshot("job-list")

    logs = second_page(logged_in)
    logs.goto(f"/jobs/{uid}/logs")
    logs.page.select_option("#log-worker", "*")
    logs.page.wait_for_function(
        "() => ['[trainer-0]', '[trainer-1]', '[pserver-0]']"
        ".every(p => document.getElementById('log').textContent.includes(p))",
        timeout=15_000,
    )
    logs.screenshot("logs")
    assert logged_in.problems == [] and listing.problems == [] and logs.problems == []


def put_script(datacenter: Datacenter, user: User, jobname: str, text: str) -> None:
    folder = Path(datacenter.storage_root) / "home" / user.username / "jobs" / jobname
    folder.mkdir(parents=True)
    (folder / "train.py").write_text(text)


def test_a_long_job_is_killed_from_its_page_its_html_log_shows_as_text_and_clone_prefills_the_form(
    logged_in: Page, local_dc: Datacenter, alice: User, alice_api: APIClient, worker: WorkerProcess
) -> None:
    put_script(local_dc, alice, "long", f"import time\nprint({HTML!r}, flush=True)\ntime.sleep(600)\n")
    spec = {"jobname": "long", "entry": "python train.py", "parallelism": 1, "pservers": 0, "passes": 7,
            "env": {"SEED": "42"}}
    assert alice_api.post("/api/v1/jobs", spec, format="json").status_code == 201
    uid = Job.objects.get(name="long").uid
    logged_in.goto(f"/jobs/{uid}/")
    page = logged_in.page
    page.wait_for_function("() => document.getElementById('log').textContent.includes('<b>bold</b>')",
                           timeout=TRAIN_TIMEOUT_MS)
    assert page.locator("#log img, #log b").count() == 0 and page.title() != "pwned"
    page.wait_for_selector('[data-testid="job-state"]:text-is("running")', timeout=30_000)

    page.once("dialog", lambda dialog: dialog.accept())
    page.click('[data-testid="kill"]')
    page.wait_for_selector('[data-testid="job-state"]:text-is("killed")', timeout=30_000)
    assert page.locator('[data-testid="kill"]').count() == 0
    wait_for(lambda: Job.objects.filter(uid=uid, state="killed").first(), "the job killed", 30, watch=worker)

    page.click('[data-testid="clone"]')
    page.wait_for_url("**/jobs/new?clone=*")
    filled = {name: page.input_value(f"#id_{name}")
              for name in ("jobname", "entry", "parallelism", "pservers", "passes", "env")}
    assert filled == {"jobname": "long", "entry": "python train.py", "parallelism": "1", "pservers": "0",
                      "passes": "7", "env": "SEED=42"}
    assert logged_in.problems == []


def test_a_folder_uploads_with_the_progress_bar_and_an_html_file_name_shows_as_text(
    logged_in: Page, local_dc: Datacenter, alice: User, tmp_path: Path
) -> None:
    home = Path(local_dc.storage_root) / "home" / "alice"
    home.mkdir(parents=True, exist_ok=True)
    (home / HTML.replace("/", "")).write_text("a file named with HTML")
    folder = tmp_path / "dataset"
    (folder / "part").mkdir(parents=True)
    (folder / "part" / "small.txt").write_text("hello\n")
    (folder / "big.bin").write_bytes(os.urandom(9 * 1024 * 1024))  # two chunks of 8 MiB

    logged_in.goto("/files/?path=/pfs/local/home/alice")
    page = logged_in.page
    names = page.eval_on_selector_all('[data-testid="file-row"] td:first-child', "tds => tds.map(t => t.textContent)")
    assert HTML.replace("/", "") in names
    assert page.locator('[data-testid="files"] img, [data-testid="files"] b').count() == 0 and page.title() != "pwned"

    # The page reloads when the upload is done: keep what the bar and the status showed across it.
    page.evaluate("""() => {
      const bar = document.getElementById('upload-progress');
      new MutationObserver(() => {
        const seen = JSON.parse(sessionStorage.getItem('progress') || '[]');
        seen.push({hidden: bar.hidden, value: bar.value, status: document.getElementById('upload-status').textContent});
        sessionStorage.setItem('progress', JSON.stringify(seen));
      }).observe(document.getElementById('upload-status'), {childList: true, characterData: true, subtree: true});
    }""")
    with page.expect_navigation(timeout=60_000):
        page.set_input_files('[data-testid="upload-folder"]', str(folder))
    seen_bar = page.evaluate("JSON.parse(sessionStorage.getItem('progress') || '[]')")
    assert seen_bar and all(not shown["hidden"] for shown in seen_bar), seen_bar
    assert seen_bar[-1] == {"hidden": False, "value": 100, "status": "uploaded 2 files"}, seen_bar
    page.click('a.dir:text-is("dataset/")')
    page.wait_for_selector('a:text-is("big.bin")')
    assert (home / "dataset" / "big.bin").stat().st_size == 9 * 1024 * 1024
    assert (home / "dataset" / "part" / "small.txt").read_text() == "hello\n"
    logged_in.goto("/files/?path=/pfs/local/home/alice")
    logged_in.screenshot("file-browser")
    assert logged_in.problems == []


def test_the_loss_curve_survives_a_metrics_request_that_never_answers_and_one_that_fails(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = running_job(local_dc, alice)
    append_points(job, 0, range(50))
    append_points(job, 1, range(40))
    page = logged_in.page
    first: set[str] = set()

    def hang_or_fail_once(route: Any) -> None:
        worker = "trainer-0" if "worker=trainer-0" in route.request.url else "trainer-1"
        if worker in first:
            route.continue_()
        elif worker == "trainer-0":
            first.add(worker)  # never answered: the page must give it up and ask again
        else:
            first.add(worker)
            route.fulfill(status=503, body="")

    page.route("**/metrics?*", hang_or_fail_once)
    logged_in.goto(f"/jobs/{job.uid}/")
    for trainer, points in ((0, 50), (1, 40)):  # each point once: the cursor moved only with an answer
        page.wait_for_selector(f'figure[data-metric="loss"][data-points-trainer-{trainer}="{points}"]',
                               state="attached", timeout=30_000)
    assert first == {"trainer-0", "trainer-1"}
    assert page.evaluate("htmx.config.timeout") == 10_000  # the live area's polls give up a hung request too
    assert int(page.get_attribute("#metrics", "data-failures") or 0) >= 2
    assert all("503" in problem for problem in logged_in.problems), logged_in.problems
