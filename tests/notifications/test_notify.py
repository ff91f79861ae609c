"""Job-end notifications: one POST to a loopback receiver and one email per finished job; private addresses refused."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from rest_framework.test import APIClient

from core import addresses
from datacenters.models import Datacenter
from jobs.models import Job, JobState
from jobs.states import transition
from notifications import services, webhook
from notifications.models import Delivery, DeliveryState, NotifyPreference
from portal.celery import app as celery_app


class Receiver:
    """A webhook receiver on 127.0.0.1 that records each POST; `fail_first` answers 503 that many times."""

    def __init__(self, fail_first: int = 0, status: int = 200) -> None:
        self.posts: list[dict[str, Any]] = []
        self.fail_first, self.status = fail_first, status
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if receiver.fail_first > 0:
                    receiver.fail_first -= 1
                    self.send_response(503)
                else:
                    receiver.posts.append(data)
                    self.send_response(receiver.status)
                    if receiver.status in (301, 302):
                        self.send_header("Location", "http://127.0.0.1:1/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook?token=abc"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


@pytest.fixture
def eager(settings: Any) -> Iterator[None]:
    """Tasks run in this process (their retries too); loopback receivers allowed, as an operator may."""
    settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    before = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = before


def running_job(dc: Datacenter, owner: User, notify: dict[str, Any] | None, name: str = "fit") -> Job:
    spec: dict[str, Any] = {"parallelism": 1, "pservers": 0}
    if notify is not None:
        spec["notify"] = notify
    return Job.objects.create(owner=owner, datacenter=dc, name=name, uid=f"{name}-ab12c", spec=spec,
                              state=JobState.RUNNING)


def finish(job: Job, state: JobState, capture: Any) -> None:
    with capture(execute=True):
        assert transition(job.pk, state, reason="")
    with capture(execute=True):
        pass  # the deliveries' own on_commit sends


@pytest.mark.django_db(transaction=True)
def test_a_finished_job_posts_once_to_its_webhook_and_emails_once(
    eager: None, receiver: Receiver, local_dc: Datacenter, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    job = running_job(local_dc, alice, {"email": True, "webhook": receiver.url})
    finish(job, JobState.SUCCEEDED, django_capture_on_commit_callbacks)
    # A second try to end it (a reconciler racing the kill) moves nothing and sends nothing.
    assert not transition(job.pk, JobState.KILLED)
    services.job_ended(job.pk)  # the task run again (a redelivered message): no new delivery
    (post,) = receiver.posts
    assert post["job"] == "fit" and post["state"] == "succeeded" and post["url"].endswith(f"/jobs/{job.uid}/")
    assert set(post) >= {"job", "state", "reason", "duration_seconds", "url"}
    (email,) = mail.outbox
    assert email.to == ["alice@example.com"] and "fit succeeded" in email.subject
    assert set(Delivery.objects.values_list("channel", "state")) == {("email", "sent"), ("webhook", "sent")}


@pytest.mark.django_db(transaction=True)
def test_each_finished_job_gets_its_own_single_post(
    eager: None, receiver: Receiver, local_dc: Datacenter, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    jobs = [running_job(local_dc, alice, {"webhook": receiver.url}, name=f"job{i}") for i in range(3)]
    for job, state in zip(jobs, (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED), strict=True):
        finish(job, state, django_capture_on_commit_callbacks)
    assert sorted((p["job"], p["state"]) for p in receiver.posts) == [
        ("job0", "succeeded"), ("job1", "failed"), ("job2", "killed")
    ]


@pytest.mark.django_db(transaction=True)
def test_a_receiver_that_is_down_is_retried_until_it_takes_the_post(
    eager: None, local_dc: Datacenter, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    flaky = Receiver(fail_first=2)
    celery_app.conf.task_eager_propagates = False  # eager apply() then runs the retries itself
    try:
        job = running_job(local_dc, alice, {"webhook": flaky.url})
        finish(job, JobState.FAILED, django_capture_on_commit_callbacks)
        assert len(flaky.posts) == 1
        delivery = Delivery.objects.get(job=job)
        assert (delivery.state, delivery.attempts) == (DeliveryState.SENT, 3)
    finally:
        flaky.close()


@pytest.mark.django_db(transaction=True)
def test_the_profile_default_applies_when_the_job_says_nothing(
    eager: None, receiver: Receiver, local_dc: Datacenter, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    NotifyPreference.objects.create(user=alice, email=True, webhook=receiver.url)
    silent = running_job(local_dc, alice, {"email": False, "webhook": ""}, name="quiet")
    default = running_job(local_dc, alice, None, name="loud")
    finish(silent, JobState.SUCCEEDED, django_capture_on_commit_callbacks)
    finish(default, JobState.SUCCEEDED, django_capture_on_commit_callbacks)
    assert [p["job"] for p in receiver.posts] == ["loud"] and len(mail.outbox) == 1


@pytest.mark.django_db(transaction=True)
def test_loopback_is_refused_unless_the_operator_allows_it(
    eager: None, settings: Any, receiver: Receiver, local_dc: Datacenter, alice: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE = False
    job = running_job(local_dc, alice, {"webhook": receiver.url})
    finish(job, JobState.SUCCEEDED, django_capture_on_commit_callbacks)
    assert receiver.posts == []
    delivery = Delivery.objects.get(job=job)
    assert delivery.state == DeliveryState.FAILED and "not a public address" in delivery.error


@pytest.mark.django_db(transaction=True)
def test_a_redirect_is_not_followed(
    eager: None, local_dc: Datacenter, alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    moved = Receiver(status=302)
    try:
        job = running_job(local_dc, alice, {"webhook": moved.url})
        finish(job, JobState.SUCCEEDED, django_capture_on_commit_callbacks)
        delivery = Delivery.objects.get(job=job)
        assert delivery.state == DeliveryState.FAILED and "redirects are not followed" in delivery.error
        assert len(moved.posts) == 1
    finally:
        moved.close()


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "::1", "fd00::1", "::ffff:127.0.0.1",
     "0.0.0.0", "100.64.0.1"],  # noqa: S104 - refused, not bound
)
def test_private_and_special_addresses_are_refused(address: str) -> None:
    with pytest.raises(webhook.WebhookRefused):
        webhook.resolve_checked(address, 80, allow_private=False)


@pytest.mark.parametrize(
    "address",
    [
        "::127.0.0.1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::1",  # loopback, four ways
        "::ffff:10.0.0.1", "::10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1",  # private, metadata
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, whose client is 127.0.0.1
        "::ffff:0:7f00:1", "::ffff:0:a00:1",  # IPv4-translated (SIIT, RFC 6145)
        "64:ff9b:1::7f00:1", "64:ff9b:1:7f00:1::",  # local-use NAT64 (RFC 8215), never global
        "fec0::1",  # site-local (deprecated, private)
    ],
)  # fmt: skip
def test_ipv6_forms_of_a_private_ipv4_address_are_refused(address: str) -> None:
    assert not addresses.allowed(address, allow_private=False)
    with pytest.raises(webhook.WebhookRefused):
        webhook.resolve_checked(address, 80, allow_private=False)


@pytest.mark.parametrize("address", ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2606:4700::1111"])
def test_ipv6_forms_of_a_public_address_pass(address: str) -> None:
    assert addresses.allowed(address, allow_private=False)


@pytest.mark.parametrize("address", ["::ffff:224.0.0.1", "64:ff9b::", "2002:e000:1::1", "::"])
def test_an_embedded_multicast_or_unspecified_address_is_refused_even_where_private_is_allowed(address: str) -> None:
    assert not addresses.allowed(address, allow_private=True)


def test_a_name_that_resolves_to_loopback_is_refused() -> None:
    with pytest.raises(webhook.WebhookRefused, match="localhost resolves to"):
        webhook.resolve_checked("localhost", 80, allow_private=False)


def test_a_public_address_passes() -> None:
    assert webhook.resolve_checked("93.184.215.14", 443, allow_private=False) == "93.184.215.14"


@pytest.mark.parametrize(
    ("notify", "message"),
    [
        ("yes", "must be an object"),
        ({"email": "yes"}, "email must be true or false"),
        ({"sms": True}, "unknown key 'sms'"),
        ({"webhook": "ftp://x.example"}, "http:// or https://"),
        ({"webhook": "https://user:pw@x.example/"}, "must not carry a user or password"),
        ({"webhook": "https://x.example/" + "a" * 2000}, "at most 2000"),
        ({"webhook": "https://x.example/a b"}, "without spaces"),
    ],
)
def test_a_bad_notify_is_a_400_naming_the_field_and_creates_nothing(
    alice_api: APIClient, local_dc: Datacenter, notify: object, message: str
) -> None:
    spec = {"jobname": "fit", "entry": "python train.py", "notify": notify}
    response = alice_api.post("/api/v1/jobs", spec, format="json")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["notify"] and message in json.dumps(response.json())
    assert not Job.objects.exists()


def test_the_profile_default_is_read_and_set_by_api(alice_api: APIClient, bob_api: APIClient) -> None:
    assert alice_api.get("/api/v1/notifications").json() == {"email": False, "webhook": ""}
    wanted = {"email": True, "webhook": "https://hooks.example/x"}
    answer = alice_api.put("/api/v1/notifications", wanted, format="json")
    assert answer.status_code == 200
    assert alice_api.get("/api/v1/notifications").json() == {"email": True, "webhook": "https://hooks.example/x"}
    assert bob_api.get("/api/v1/notifications").json() == {"email": False, "webhook": ""}
    bad = alice_api.put("/api/v1/notifications", {"email": True, "webhook": "javascript:alert(1)"}, format="json")
    assert bad.status_code == 400 and [e["field"] for e in bad.json()["errors"]] == ["webhook"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://2130706433/x", "http://[::ffff:10.0.0.1]/x",
                                 "http://169.254.169.254/latest", "http://localhost:8000/hook"])  # fmt: skip
def test_a_webhook_that_points_at_a_private_address_is_refused_when_saved_or_submitted(
    alice_api: APIClient, local_dc: Datacenter, url: str, settings: Any
) -> None:
    settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE = False
    saved = alice_api.put("/api/v1/notifications", {"email": True, "webhook": url}, format="json")
    assert saved.status_code == 400 and [e["field"] for e in saved.json()["errors"]] == ["webhook"]
    assert "not a public address" in saved.json()["errors"][0]["message"]
    assert not NotifyPreference.objects.exists()
    spec = {"jobname": "fit", "entry": "python train.py", "notify": {"webhook": url}}
    for query in ("?dry_run=1", ""):
        checked = alice_api.post(f"/api/v1/jobs{query}", spec, format="json")
        assert checked.status_code == 400 and [e["field"] for e in checked.json()["errors"]] == ["notify"]
    assert not Job.objects.exists()


def test_a_private_webhook_is_saved_where_the_operator_allows_private_addresses(
    alice_api: APIClient, settings: Any
) -> None:
    settings.PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE = True
    private = {"email": False, "webhook": "http://127.0.0.1:9/hook"}
    assert alice_api.put("/api/v1/notifications", private, format="json").status_code == 200


def test_a_name_that_resolves_slowly_or_not_at_all_is_left_to_the_senders_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def hangs(host: str, port: int) -> list[str]:
        time.sleep(5)  # a resolver that does not answer: the save must not wait for it
        return ["127.0.0.1"]

    started = time.monotonic()
    assert addresses.url_problem("https://hooks.example.com/x", allow_private=False) is None  # no such name here
    monkeypatch.setattr(addresses, "resolve", hangs)
    assert addresses.url_problem("https://slow.example.com/x", allow_private=False, wait=0.2) is None
    assert time.monotonic() - started < 4  # bounded: the hung lookup holds a thread of the check's pool, no more
