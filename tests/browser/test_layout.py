"""Every page in a real browser: the favicon, the layout at a phone's width, the pages without JavaScript."""

from __future__ import annotations

import pytest

from tests.browser.conftest import Page

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
