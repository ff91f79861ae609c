"""Every page in a real browser: the favicon, the layout at a phone's width, the pages without JavaScript."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from datacenters.models import Datacenter
from health.models import WorkerHeartbeat
from jobs.follow import reconcile_runs
from jobs.models import Job, Worker
from registry.models import RegistrySecret
from tests.browser.conftest import Page, login
from tests.browser.test_experiment_page import make_experiment
from tests.browser.test_metrics_chart import append_points, running_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_favicon_is_shown_and_favicon_ico_is_an_icon(logged_in: Page) -> None:
    page = logged_in.page
    logged_in.goto("/jobs/")
    icon = page.get_attribute('link[rel="icon"]', "href") or ""
    assert page.request.get(logged_in.url + icon).headers["content-type"] == "image/svg+xml"
    answer = page.request.get(logged_in.url + "/favicon.ico")  # redirected to the static file
    assert answer.status == 200 and answer.body()[:4] == b"\0\0\1\0"
    logged_in.goto("/admin/")  # a page that links no icon: the browser asks /favicon.ico itself
    assert logged_in.problems == []


def portal_world(local_dc: Datacenter, alice: User) -> Job:
    """A running job with a log, metrics and progress, a registry secret and a file: every main page has content."""
    job = running_job(local_dc, alice)
    job.progress = {"step": 30, "total_steps": 1000, "fraction": 0.03, "eta_seconds": 5400, "rate_steps_per_s": 0.18}
    job.save(update_fields=["progress"])
    append_points(job, 0, range(30))
    log = Path(local_dc.storage_root, "home", "alice", "jobs", job.name, "output", job.uid, "trainer_0", "log.txt")
    log.write_text("".join(f"step {step} loss {1 / (step + 1):.4f}\n" for step in range(30)))
    Worker.objects.filter(job=job).update(host="node-with-a-long-host-name.cluster.example.com",
                                          message="running since a while, with a message long enough to wrap")
    RegistrySecret.objects.create(owner=alice, name="private", server="registry.example.com:5000",
                                  username="alice-robot-account", password="x")
    (Path(local_dc.storage_root, "home", "alice") / "a-file-with-a-rather-long-name-for-a-phone.csv").write_text("1\n")
    now = timezone.now()  # the health page: one worker alive, one stale
    WorkerHeartbeat.objects.create(hostname="worker-1.cluster.example.com", last_seen=now, beats=120)
    WorkerHeartbeat.objects.create(hostname="worker-2.cluster.example.com", last_seen=now - timedelta(hours=2), beats=7)
    reconcile_runs.engine_error(local_dc.pk, "cannot reach the datacenter: HTTPSConnectionPool(host='api.example"
                                ".com', port=6443): Max retries exceeded (Connection refused)")  # a long one
    make_experiment(local_dc, alice, trials=12, with_jobs=3)
    return job


def main_pages(job: Job) -> list[str]:
    return ["/", "/jobs/", f"/jobs/{job.uid}/", f"/jobs/{job.uid}/logs", "/jobs/new", "/files/", "/quota/",
            "/usage/", "/queue/", "/registries/", "/profile/", "/profile/password/", "/profile/notifications/",
            "/experiments/", "/experiments/grid-ab12c/", f"/compare/?jobs={job.uid},grid-0-ab12c"]


def sideways(page: Page, paths: list[str], width: int, device: str) -> dict[str, int]:
    """The pages of `paths` wider than `width`, with their width (each screenshot kept)."""
    wide: dict[str, int] = {}
    for path in paths:
        page.goto(path)
        page.page.wait_for_load_state("networkidle")
        # A template comment over two lines ({# ... #} is one-line only) is shown as text: none may show.
        assert "{#" not in page.page.inner_text("body"), path
        scroll_width = page.page.evaluate("document.scrollingElement.scrollWidth")
        if scroll_width > width:
            wide[path] = scroll_width
        page.screenshot(device + (path.replace("/", "-").rstrip("-") or "-home"))
    return wide


@pytest.mark.parametrize(("device", "width"), [("phone", 390), ("desktop", 1200)])
def test_no_page_scrolls_sideways_and_log_out_is_reachable(
    browser: Any, live_server: Any, local_dc: Datacenter, alice: User, carol: User, device: str, width: int
) -> None:
    job = portal_world(local_dc, alice)
    viewport = {"width": width, "height": 844}
    anonymous = Page(browser.new_context(viewport=viewport).new_page(), live_server.url)
    wide = sideways(anonymous, ["/login/", "/signup/"], width, device)
    anonymous.page.context.close()
    staff = login(browser, live_server.url, carol, viewport=viewport)  # the operators' queue, admin and API docs
    staff_pages = ["/queue/", "/health/", "/admin/", "/admin/jobs/job/", f"/admin/jobs/job/{job.pk}/change/",
                   "/api/docs/"]
    wide |= {f"{path} (staff)": size for path, size in sideways(staff, staff_pages, width, device + "-staff").items()}
    staff.page.context.close()
    user = login(browser, live_server.url, alice, viewport=viewport)
    wide |= sideways(user, main_pages(job), width, device)
    assert wide == {}
    logout = user.page.locator(".logout button")
    box = logout.bounding_box()
    assert logout.is_visible() and box and box["x"] + box["width"] <= width
    logout.click()
    user.page.wait_for_url("**/login/**")
    assert user.problems == []


def test_without_javascript_the_job_page_links_the_logs_and_shows_metrics_as_tables(
    browser: Any, live_server: Any, local_dc: Datacenter, alice: User
) -> None:
    job = portal_world(local_dc, alice)
    append_points(job, 1, range(5))
    plain = login(browser, live_server.url, alice, java_script_enabled=False)
    page = plain.page
    for path in (f"/jobs/{job.uid}/", f"/jobs/{job.uid}/logs"):
        plain.goto(path)
        assert not page.is_visible('[data-testid="log-pane"]') and not page.is_visible('[data-testid="log-follow"]')
        links = page.locator('[data-testid="log-noscript"] a')
        assert links.all_text_contents() == ["trainer-0", "trainer-1"]
        with page.expect_download() as download:
            links.first.click()
        assert Path(download.value.path()).read_text().startswith("step 0 loss 1.0000\n")
    plain.goto(f"/jobs/{job.uid}/")
    plain.screenshot("job-page-no-js")
    assert not page.is_visible("#metrics-empty")
    table = '[data-testid="metrics-table"][data-worker="trainer-{}"]'
    rows = page.eval_on_selector_all(table.format(0) + " tr", "rows => rows.map(r => r.innerText.split('\\t'))")
    assert rows[0] == ["Step", "loss"] and [row[0] for row in rows[1:]] == [str(step) for step in range(20, 30)]
    assert rows[-1][1] == "0.0333333"  # 6 significant digits
    assert page.locator(table.format(1) + " tr").count() == 1 + 5

    empty = Job.objects.create(owner=alice, datacenter=local_dc, name="quiet", uid="quiet-aa111",
                               spec={"parallelism": 1, "pservers": 0, "entry": "python train.py"})
    plain.goto(f"/jobs/{empty.uid}/")
    assert page.is_visible("#metrics-empty") and page.locator('[data-testid="metrics-table"]').count() == 0
    assert plain.problems == []
