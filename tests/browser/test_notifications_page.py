"""The notifications page in a real browser: a webhook set from the page receives the test, and the SSRF rule holds."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from core import lanes
from datacenters.models import Datacenter
from jobs.models import Job
from notifications.models import NotifyPreference
from tests.browser.conftest import Page
from tests.workers import WorkerProcess, start_worker

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver on 127.0.0.1: keeps each POST's JSON body on the server."""

    def do_POST(self) -> None:
        length = min(int(self.headers.get("Content-Length") or 0), 64 * 1024)
        self.server.bodies.append(json.loads(self.rfile.read(length)))  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass  # quiet test output


@pytest.fixture
def receiver() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    server.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def save_webhook(logged_in: Page, url: str) -> None:
    page = logged_in.page
    logged_in.goto("/profile/")
    page.click('[data-testid="notifications-link"]')
    page.fill("#n-webhook", url)
    page.click('[data-testid="notify-save"]')
    page.wait_for_selector(".message.success")


@pytest.fixture
def notify_worker(tmp_path: Path) -> Iterator[WorkerProcess]:
    """The notify lane's worker, which sends the page's tests; private receivers allowed (the receiver is here)."""
    worker = start_worker(tmp_path, (lanes.NOTIFY,), extra_env={"PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE": "true"})
    yield worker
    worker.stop()


def test_a_webhook_set_on_the_page_receives_the_test(
    logged_in: Page, alice: User, receiver: ThreadingHTTPServer, settings: Any, notify_worker: WorkerProcess
) -> None:
    settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is this machine: an operator's opt-in
    url = f"http://127.0.0.1:{receiver.server_port}/hook?token=abc"
    save_webhook(logged_in, url)
    assert NotifyPreference.objects.get(user=alice).webhook == url
    page = logged_in.page
    page.click('[data-testid="notify-test"]')
    # At once again (the request only queued the first): refused, one test every 10 s.
    page.click('[data-testid="notify-test"]')
    assert "less than" in page.inner_text(".message.error")
    # The notify lane sends the first, and the page shows what the receiver said.
    message = page.inner_text('[data-testid="last-test"] .message.success', timeout=60_000)
    assert "Test webhook: the receiver answered HTTP 204" in message
    bodies = receiver.bodies  # type: ignore[attr-defined]
    assert len(bodies) == 1 and bodies[0]["test"] is True and bodies[0]["user"] == "alice"
    logged_in.screenshot("notifications-page")
    assert logged_in.problems == []


def test_a_private_webhook_is_refused_when_saved_and_the_page_says_why(
    logged_in: Page, alice: User, receiver: ThreadingHTTPServer
) -> None:
    page = logged_in.page
    logged_in.goto("/profile/notifications/")
    page.fill("#n-webhook", f"http://127.0.0.1:{receiver.server_port}/hook")
    page.click('[data-testid="notify-save"]')
    page.wait_for_selector('[data-testid="error-summary"] a[href="#n-webhook"]')
    assert "127.0.0.1 is not a public address" in page.inner_text('[data-testid="error-summary"]')
    assert not NotifyPreference.objects.filter(user=alice).exists()
    assert receiver.bodies == []  # type: ignore[attr-defined]
    assert logged_in.problems and all("status of 400" in problem for problem in logged_in.problems)


def test_a_bad_webhook_is_summarised_on_its_field(logged_in: Page, alice: User) -> None:
    page = logged_in.page
    logged_in.goto("/profile/notifications/")
    page.fill("#n-webhook", "ftp://example.com/x")
    page.evaluate("document.querySelector('#n-webhook').type = 'text'")  # past the browser's own URL check
    page.click('[data-testid="notify-save"]')
    page.wait_for_selector('[data-testid="error-summary"] a[href="#n-webhook"]')
    assert "http:// or https://" in page.inner_text('[data-testid="error-summary"]')
    assert not NotifyPreference.objects.filter(user=alice).exists()
    assert logged_in.problems and all("status of 400" in problem for problem in logged_in.problems)


def test_the_submit_form_carries_a_per_job_notify(logged_in: Page, local_dc: Datacenter, alice: User) -> None:
    Path(local_dc.storage_root, "home", "alice", "jobs", "told").mkdir(parents=True)  # its package folder
    page = logged_in.page
    logged_in.goto("/jobs/new")
    page.fill("#id_jobname", "told")
    page.fill("#id_entry", "python train.py")
    page.fill("#id_notify", "email,webhook=https://hooks.example.com/x?a=1,b")
    page.click('[data-testid="submit"]')
    page.wait_for_url("**/jobs/told-*/")
    assert Job.objects.get(name="told").spec["notify"] == {"email": True, "webhook": "https://hooks.example.com/x?a=1,b"}
    logged_in.goto("/jobs/new")
    page.fill("#id_jobname", "told2")
    page.fill("#id_entry", "python train.py")
    page.fill("#id_notify", "sms")
    page.click('[data-testid="submit"]')
    page.wait_for_selector('[data-testid="error-summary"] a[href="#id_notify"]')
    assert not Job.objects.filter(name="told2").exists()
