"""Browser fixtures: Debian's Chromium (never a downloaded browser) driven by Playwright, logged in to a live portal.

Without /usr/bin/chromium the browser tests skip with one line, except in CI (CI=true), where they fail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import sync_playwright

from tests.conftest import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
SCREENS = ROOT / "var" / "test-output" / "screens"
CHROMIUM = os.environ.get("PADDLECLOUD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        message = f"no Chromium at {CHROMIUM}: apt-get install -y chromium (browser tests skipped)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    # The portal's live_server runs in this process's thread; Playwright's sync API runs its own loop.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


class Page:
    """A logged-in page that records console errors and CSP violations."""

    def __init__(self, page: Any, url: str) -> None:
        self.page, self.url = page, url
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(str(exc)))

    def _console(self, message: Any) -> None:
        if message.type == "error":  # a missing favicon too: the portal serves one
            self.problems.append(message.text)

    def goto(self, path: str) -> None:
        self.page.goto(self.url + path)
        # Listen in the page as well: a CSP violation fires this event before any console message.
        self.page.evaluate(
            "document.addEventListener('securitypolicyviolation', e => "
            "console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI))"
        )

    def screenshot(self, name: str) -> Path:
        SCREENS.mkdir(parents=True, exist_ok=True)
        path = SCREENS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def login(browser: Any, url: str, user: User, **context_options: Any) -> Page:
    """A new browser context (its own cookies; e.g. a phone's viewport, or no JavaScript) logged in as `user`."""
    context_options.setdefault("viewport", {"width": 1200, "height": 900})
    context = browser.new_context(**context_options)
    page = Page(context.new_page(), url)
    page.page.goto(url + "/login/")
    page.page.fill("input[name=username]", user.username)
    page.page.fill("input[name=password]", PASSWORD)
    page.page.click("button[type=submit]")
    page.page.wait_for_url(lambda address: "/login" not in address)
    return page


@pytest.fixture
def logged_in(browser: Any, live_server: Any, alice: User) -> Iterator[Page]:
    page = login(browser, live_server.url, alice)
    yield page
    page.page.context.close()
