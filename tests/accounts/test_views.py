"""Pages: login, signup (open, approval, closed; throttled per address), profile token with regenerate, CSRF."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from accounts.models import ApiToken
from datacenters import newcomers, quota
from datacenters.models import Datacenter
from tests.conftest import PASSWORD


def test_login_page_logs_alice_in_and_shows_the_dashboard(alice: User, local_dc: Datacenter) -> None:
    client = Client()
    response = client.post("/login/", {"username": "alice", "password": PASSWORD}, follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    assert "Dashboard" in text and "alice" in text and "local" in text


def test_wrong_password_on_the_login_page_shows_an_error(alice: User) -> None:
    response = Client().post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "did not match" in response.content.decode()


def test_forms_require_csrf(alice: User) -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 403
    page = client.get("/login/").content.decode()
    assert "csrfmiddlewaretoken" in page


def test_signup_creates_an_active_user_and_logs_in(db: None) -> None:
    client = Client()
    response = client.post(
        "/signup/", {"username": "dave", "email": "dave@example.com", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert response.status_code == 302
    assert User.objects.get(username="dave").is_active
    assert client.get("/").status_code == 200


def test_an_account_made_by_signup_starts_with_each_datacenter_s_new_user_quota(
    local_dc: Datacenter, alice: User
) -> None:
    """(datacenters/newcomers.py) The new account's quota row holds the datacenter's `new_user_*` values (blank:
    the default's), in datacenters made later too; accounts operators make keep the default quota."""
    local_dc.new_user_storage = ""  # blank: the default quota's storage
    local_dc.save()
    body = {"username": "dave", "email": "dave@example.com", "password1": PASSWORD, "password2": PASSWORD}
    assert Client().post("/signup/", body).status_code == 302
    dave = User.objects.get(username="dave")
    small = quota.limits(dave, local_dc)
    assert (small.cpu, small.memory, small.gpu, small.jobs) == (Decimal(2), 8 * 2**30, 0, 2)
    assert small.storage == quota.limits(alice, local_dc).storage == 100 * 2**30
    assert quota.limits(alice, local_dc).cpu == 16  # an operator's account: the datacenter's default quota
    later = Datacenter.objects.create(name="later", storage_root=local_dc.storage_root, new_user_cpu="1")
    assert quota.limits(dave, later).cpu == 1 and quota.limits(alice, later).cpu == 16
    assert dave.groups.filter(name=newcomers.NEWCOMERS).exists()


def test_signup_with_approval_leaves_the_account_inactive(db: None, settings: SettingsWrapper) -> None:
    settings.PADDLECLOUD_SIGNUP = "approval"
    assert "An operator approves each new account" in Client().get("/signup/").content.decode()
    response = Client().post(
        "/signup/",
        {"username": "erin", "email": "erin@example.com", "password1": PASSWORD, "password2": PASSWORD},
        follow=True,
    )
    assert "must approve it" in response.content.decode()
    assert not User.objects.get(username="erin").is_active


def test_signup_can_be_closed(db: None, settings: SettingsWrapper) -> None:
    settings.PADDLECLOUD_SIGNUP = "closed"
    assert Client().get("/signup/").status_code == 404
    data = {"username": "mallory", "email": "m@example.com", "password1": PASSWORD, "password2": PASSWORD}
    assert Client().post("/signup/", data).status_code == 404 and not User.objects.filter(username="mallory").exists()
    assert "Sign up" not in Client().get("/login/").content.decode()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("username", "bad user!", "Enter a valid username"),
        ("email", "not-an-email", "Enter a valid email address"),
        ("password2", "different", "didn’t match"),
    ],
)
def test_signup_errors_name_the_field(db: None, field: str, value: str, message: str) -> None:
    data = {"username": "frank", "email": "f@example.com", "password1": PASSWORD, "password2": PASSWORD, field: value}
    response = Client().post("/signup/", data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not User.objects.filter(email="f@example.com").exists()


def test_profile_shows_the_token_and_regenerate_replaces_it(alice: User) -> None:
    client = Client()
    client.force_login(alice)
    page = client.get("/profile/").content.decode()
    first = ApiToken.objects.get(user=alice)
    assert first.key in page
    response = client.post("/profile/token/regenerate", follow=True)
    assert "A new API token was issued" in response.content.decode()
    second = ApiToken.objects.valid().get(user=alice)
    assert second.key != first.key and second.key in response.content.decode()
    assert not ApiToken.objects.get(pk=first.pk).is_valid


def test_bob_never_sees_alice_token_on_his_profile(alice: User, bob: User) -> None:
    client = Client()
    client.force_login(alice)
    client.get("/profile/")
    alice_key = ApiToken.objects.get(user=alice).key
    client.force_login(bob)
    assert alice_key not in client.get("/profile/").content.decode()


def test_regenerate_needs_post(alice: User) -> None:
    client = Client()
    client.force_login(alice)
    assert client.get("/profile/token/regenerate").status_code == 405


def test_every_template_comment_closes_on_its_own_line() -> None:
    """Django's {# #} comments are one line: one spread over two is shown on the page (found on every page once)."""
    root = Path(__file__).resolve().parents[2]
    templates = sorted(p for p in root.glob("*/templates/**/*.html") if ".venv" not in p.parts)
    templates += sorted((root / "templates").glob("**/*.html"))
    assert templates
    unclosed = [f"{path.relative_to(root)}:{number}" for path in templates
                for number, line in enumerate(path.read_text().splitlines(), 1)
                if "{#" in line and "#}" not in line.split("{#", 1)[1]]  # fmt: skip
    assert unclosed == [], "a {# comment continues on the next line; use {% comment %} for more than one"


def test_the_login_page_shows_no_template_comment(db: None) -> None:
    assert "{#" not in Client().get("/login/").content.decode()


def test_the_favicon_is_linked_from_every_page_and_answers_at_favicon_ico(db: None) -> None:
    client = Client()
    response = client.get("/favicon.ico")  # asked for by browsers and crawlers, logged in or not
    assert response.status_code == 302 and response["Location"].endswith("/favicon.ico")
    icon = finders.find("favicon.ico")
    assert icon and Path(str(icon)).read_bytes()[:4] == b"\0\0\1\0"  # an ICO header
    assert 'rel="icon" href="/static/favicon.svg"' in client.get("/login/").content.decode()


def test_signups_from_one_address_are_limited(db: None, settings: SettingsWrapper) -> None:
    settings.PADDLECLOUD_SIGNUP_RATE = "3/h"
    client = Client(REMOTE_ADDR="203.0.113.7")

    def sign_up(name: str, **extra: str) -> Any:
        form = {"username": name, "email": f"{name}@example.com", "password1": PASSWORD, "password2": PASSWORD}
        return client.post("/signup/", {**form, **extra})

    assert sign_up("typo", password2="different").status_code == 400  # a form's error costs no signup
    assert [sign_up(f"bot{i}").status_code for i in range(3)] == [302, 302, 302]
    refused = sign_up("bot3")
    assert refused.status_code == 429 and 3000 < int(refused["Retry-After"]) <= 3600
    assert "Too many accounts were made from your address" in refused.content.decode()
    assert not User.objects.filter(username="bot3").exists()
    other = Client(REMOTE_ADDR="198.51.100.9").post(
        "/signup/", {"username": "dave", "email": "d@example.com", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert other.status_code == 302  # another address is not held back


def test_a_replaced_signup_setting_stops_the_portal_with_its_replacement_named() -> None:
    env = {**os.environ, "PADDLECLOUD_SIGNUP_ENABLED": "false", "DJANGO_SETTINGS_MODULE": "portal.settings"}
    run = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert run.returncode != 0 and "replaced by PADDLECLOUD_SIGNUP=open|approval|closed" in run.stderr
