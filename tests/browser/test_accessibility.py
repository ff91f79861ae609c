"""Accessibility in a real browser: axe-core (vendored) on every main page, the skip link, the forms' error summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter, Quota
from jobs.models import Job, PriorityClass
from jobs.scheduling import priorities
from tests.browser.conftest import SCREENS, Page, login
from tests.browser.test_layout import main_pages, portal_world
from tests.conftest import PASSWORD
from tests.jobs.test_queue_api import make_job

pytestmark = pytest.mark.django_db(transaction=True)

AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text()
BLOCKING = ("critical", "serious")
IMPACTS = ("critical", "serious", "moderate", "minor")


def violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's violations on the page now (run by the DevTools protocol: the CSP allows no inline script)."""
    page.page.wait_for_load_state("networkidle")
    page.page.evaluate(AXE)
    found: list[dict[str, Any]] = page.page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => "
        "({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)})))"
    )
    return found


class Audit:
    """Pages' violations: the blocking ones by page, and every page's counts by impact."""

    def __init__(self) -> None:
        self.blocking: dict[str, list[dict[str, Any]]] = {}
        self.counts: dict[str, dict[str, int]] = {}

    def check(self, page: Page, name: str) -> None:
        found = violations(page)
        self.counts[name] = {impact: sum(v["impact"] == impact for v in found) for impact in IMPACTS}
        if bad := [v for v in found if v["impact"] in BLOCKING]:
            self.blocking[name] = bad

    def visit(
        self, page: Page, paths: list[str], suffix: str = "", ready: dict[str, str] | None = None, shots: bool = False
    ) -> None:
        for path in paths:
            page.goto(path)
            if selector := (ready or {}).get(path):
                page.page.wait_for_selector(selector)
            self.check(page, path + suffix)
            if shots:  # looked at by people: axe cannot judge everything (var/test-output/screens)
                page.screenshot("axe" + path.replace("/", "-").rstrip("-"))


def test_axe_finds_no_critical_or_serious_violation_on_the_main_pages(
    browser: Any, live_server: Any, local_dc: Datacenter, alice: User, carol: User
) -> None:
    job = portal_world(local_dc, alice)
    make_job(local_dc, carol, "waiting")  # the queue page has a row: another user's job, staff's buttons
    audit = Audit()
    audit.visit(Page(browser.new_page(), live_server.url), ["/login/", "/signup/"])
    for width in (1200, 390):
        user = login(browser, live_server.url, alice, viewport={"width": width, "height": 900})
        audit.visit(user, main_pages(job), f" at {width} px")
        user.goto("/jobs/new")  # the form with its errors
        user.page.fill("#id_jobname", "Not_A_Label")
        user.page.fill("#id_entry", "python train.py")
        user.page.click('[data-testid="submit"]')
        user.page.wait_for_selector('[data-testid="error-summary"]')
        audit.check(user, f"/jobs/new with errors at {width} px")
        user.page.context.close()
    staff = login(browser, live_server.url, carol)
    Quota.objects.create(user=alice, datacenter=local_dc, cpu="8")  # the datacenter page's quota inline has a row
    priorities.ensure_classes()
    normal = PriorityClass.objects.get(name=priorities.DEFAULT)
    staff_pages = ["/queue/", "/health/", "/admin/", "/admin/jobs/job/", f"/admin/jobs/job/{job.pk}/change/",
                   f"/admin/datacenters/datacenter/{local_dc.pk}/change/",
                   f"/admin/jobs/priorityclass/{normal.pk}/change/", "/api/docs/"]
    audit.visit(staff, staff_pages, ready={"/api/docs/": ".opblock"}, shots=True)  # .opblock: Swagger UI drew
    SCREENS.mkdir(parents=True, exist_ok=True)
    (SCREENS / "axe-counts.json").write_text(json.dumps(audit.counts, indent=1))
    assert audit.blocking == {}, json.dumps(audit.blocking, indent=1)


def test_every_page_starts_with_a_skip_link_to_its_content(logged_in: Page, local_dc: Datacenter) -> None:
    page = logged_in.page
    for path in ("/jobs/", "/files/", "/quota/"):
        logged_in.goto(path)
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        assert page.is_visible(".skip-link")  # shown once focused
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "main"
    assert logged_in.problems == []


def test_a_form_with_errors_focuses_its_summary_which_links_each_field(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    page = logged_in.page
    logged_in.goto("/jobs/new")
    page.fill("#id_jobname", "Not_A_Label")  # the browser's own checks pass; the API's do not
    page.fill("#id_entry", "python train.py")
    page.fill("#id_parallelism", "-3")
    page.click('[data-testid="submit"]')
    page.wait_for_selector('[data-testid="error-summary"]')
    assert page.evaluate("document.activeElement.dataset.testid") == "error-summary"
    links = page.eval_on_selector_all('[data-testid="error-summary"] a', "as => as.map(a => a.getAttribute('href'))")
    assert "#id_jobname" in links and "#id_parallelism" in links
    page.click('[data-testid="error-summary"] a[href="#id_parallelism"]')
    assert page.evaluate("document.activeElement.id") == "id_parallelism"
    logged_in.screenshot("submit-errors")

    logged_in.goto("/registries/")
    page.fill("#r-name", "Not A Name")
    page.fill("#r-server", "registry.example.com")
    page.fill("#r-username", "u")
    page.fill("#r-password", "p")
    page.click('[data-testid="registry-form"] button[type=submit]')
    page.wait_for_selector('[data-testid="error-summary"] a[href="#r-name"]')
    assert page.evaluate("document.activeElement.dataset.testid") == "error-summary"
    assert Job.objects.count() == 0
    assert logged_in.problems and all("status of 400" in problem for problem in logged_in.problems)  # the forms' 400s


def test_a_wrong_password_is_summarised_and_focused_on_the_login_page(
    browser: Any, live_server: Any, alice: User
) -> None:
    page = Page(browser.new_page(), live_server.url)
    page.goto("/login/")
    page.page.fill("input[name=username]", "alice")
    page.page.fill("input[name=password]", PASSWORD + "-wrong")
    page.page.click("button[type=submit]")
    page.page.wait_for_selector('[data-testid="error-summary"]')
    assert page.page.evaluate("document.activeElement.dataset.testid") == "error-summary"
    page.page.close()


def test_axe_reports_what_it_should(browser: Any) -> None:
    """The vendored axe runs and sees a missing label: a page without violations is not a broken check."""
    page = Page(browser.new_page(), "")
    page.page.set_content('<html lang="en"><title>t</title><main><input type="text"></main></html>')
    assert ("label", "critical") in [(v["id"], v["impact"]) for v in violations(page)]
    page.page.close()
