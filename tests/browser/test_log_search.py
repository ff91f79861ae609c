"""Searching a worker's whole log from the log viewer, in a real browser: the server finds a line the loaded tail
does not hold, marks the match, and opening it shows the log from that line."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from tests.browser.conftest import Page
from tests.jobs.test_log_search import log_file
from tests.pages.test_pages import make_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_line_in_the_first_mib_of_a_10_mib_log_is_found_marked_and_opened(
    logged_in: Page, local_dc: Datacenter, alice: User
) -> None:
    job = make_job(local_dc, alice)
    filler = b"".join(b"step %07d loss 0.5\n" % i for i in range(20_000))
    with log_file(local_dc, job).open("wb") as out:
        out.write(filler)
        out.write(b"RuntimeError: the Needle went missing\n")
        out.write(b"the line after it\n")
        out.write(filler * 24)
    logged_in.goto(f"/jobs/{job.uid}/logs")
    page = logged_in.page
    page.wait_for_selector('[data-testid="log-pane"] .line', timeout=15_000)
    page.fill('[data-testid="log-search"]', "needle")
    assert "0 matching lines" in page.inner_text('[data-testid="log-matches"]')  # not in the loaded tail
    page.click('[data-testid="log-search-all"]')
    found = page.wait_for_selector('[data-testid="log-results-list"] li button', timeout=15_000)
    assert found.inner_text().endswith("RuntimeError: the Needle went missing")
    assert page.inner_text('[data-testid="log-results-list"] mark') == "Needle"
    assert "1 line of trainer-0's whole log (10 MiB) holds" in page.inner_text('[data-testid="log-results-summary"]')
    logged_in.screenshot("log-search-results")
    found.click()
    hit = page.wait_for_selector('[data-testid="log-pane"] .line.hit', timeout=15_000)
    assert "RuntimeError: the Needle went missing" in hit.inner_text()
    assert "the line after it" in page.inner_text('[data-testid="log-pane"]')
    assert "paused at" in page.inner_text('[data-testid="log-status"]')
    logged_in.screenshot("log-search-opened")
    assert logged_in.problems == []
