"""The notifications page and its test button without a browser: who may use them, and what a test tells."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from datacenters.models import Datacenter
from jobs.models import Job
from jobs.web.forms import initial_from_spec
from notifications import services, tasks, views
from notifications.models import Delivery, NotifyPreference
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def logged_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_anonymous_is_sent_to_the_login_page() -> None:
    for answer in (Client().get("/profile/notifications/"), Client().post("/profile/notifications/test")):
        assert answer.status_code == 302 and "/login/" in answer["Location"]


def test_the_test_button_is_a_post_only(alice: User) -> None:
    assert logged_in(alice).get("/profile/notifications/test").status_code == 405


def test_saving_sets_only_the_users_own_default(alice: User, bob: User) -> None:
    answer = logged_in(alice).post("/profile/notifications/", {"email": "on", "webhook": "https://h.example.com/x"})
    assert answer.status_code == 302
    assert NotifyPreference.objects.get(user=alice).email is True
    assert not NotifyPreference.objects.filter(user=bob).exists()


def test_an_overlong_webhook_is_a_400_naming_the_field(alice: User) -> None:
    answer = logged_in(alice).post("/profile/notifications/", {"webhook": "https://h.example.com/" + "x" * 3000})
    assert answer.status_code == 400 and b'href="#n-webhook"' in answer.content


def test_a_test_email_goes_to_the_accounts_address_from_the_notify_lane(alice: User) -> None:
    NotifyPreference.objects.create(user=alice, email=True)
    client = logged_in(alice)
    answer = client.post("/profile/notifications/test", follow=True)
    # The request only queues it: nothing is sent inside it, and the page says the test is on its way.
    assert mail.outbox == [] and "Sending the test asked for at" in answer.content.decode()
    assert 'hx-get="/profile/notifications/last-test"' in answer.content.decode()
    tasks.send_test(alice.pk)  # what the notify lane's worker runs (the browser test runs the real worker)
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [alice.email]
    shown = client.get("/profile/notifications/last-test").content.decode()
    assert f"Test email: sent to {alice.email}" in shown and "hx-get" not in shown  # done: no more polling


def test_a_test_no_worker_took_says_so_and_stops_polling(alice: User) -> None:
    NotifyPreference.objects.create(user=alice, email=True)
    client = logged_in(alice)
    client.post("/profile/notifications/test")
    an_hour_ago = (timezone.now() - timedelta(seconds=views.STALE_SECONDS + 1)).isoformat()
    cache.set(services.test_key(alice.pk), {"state": "sending", "at": an_hour_ago}, 60)
    shown = client.get("/profile/notifications/last-test").content.decode()
    assert "no notification worker took it" in shown and "hx-get" not in shown
    assert "No test sent" in logged_in(User.objects.create_user("dora", password=PASSWORD)).get(
        "/profile/notifications/"
    ).content.decode()  # another user sees none of alice's


def test_with_nothing_set_the_test_says_so(alice: User) -> None:
    answer = logged_in(alice).post("/profile/notifications/test", follow=True)
    assert "Nothing to test" in answer.content.decode()


def test_a_cloned_job_keeps_its_notify_as_the_forms_text() -> None:
    spec = {"entry": "python train.py", "notify": {"email": True, "webhook": "https://h.example.com/x"}}
    assert initial_from_spec(spec, with_env_values=True)["notify"] == "email,webhook=https://h.example.com/x"
    assert initial_from_spec({"notify": {"email": False, "webhook": ""}}, with_env_values=True)["notify"] == "none"
    assert "notify" not in initial_from_spec({"entry": "x"}, with_env_values=True)  # the default applies


def test_a_private_webhook_is_refused_when_saved_on_the_page(alice: User) -> None:
    answer = logged_in(alice).post("/profile/notifications/", {"email": "on", "webhook": "http://127.0.0.1:9/hook"})
    assert answer.status_code == 400 and b'href="#n-webhook"' in answer.content
    assert "127.0.0.1 is not a public address" in answer.content.decode()
    assert not NotifyPreference.objects.filter(user=alice).exists()  # nothing half-saved: not even the email


def test_the_page_lists_the_users_recent_deliveries_with_what_went_wrong(
    alice: User, bob: User, local_dc: Datacenter
) -> None:
    mine = Job.objects.create(owner=alice, datacenter=local_dc, name="told", uid="told-ab12c", spec={})
    theirs = Job.objects.create(owner=bob, datacenter=local_dc, name="secret", uid="secret-ab12c", spec={})
    Delivery.objects.create(job=mine, channel="webhook", target="https://h.example.com/x", state="failed",
                            attempts=5, error="POST h.example.com: HTTP 503")  # fmt: skip
    Delivery.objects.create(job=theirs, channel="email", target="bob@example.com", state="sent")
    table = logged_in(alice).get("/profile/notifications/").content.decode()
    assert 'data-testid="deliveries"' in table and "told" in table and "POST h.example.com: HTTP 503" in table
    assert "secret" not in table and "bob@example.com" not in table
