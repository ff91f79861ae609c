"""The user admin of a shared portal: pending signups listed and approved, accounts deactivated (no login, no API)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken, issue_token
from tests.conftest import PASSWORD
from tests.pages.test_pages import page_client

pytestmark = pytest.mark.django_db


def test_an_operator_approves_a_pending_signup(carol: User, alice: User) -> None:
    pending = User.objects.create_user("erin", "erin@example.com", PASSWORD, is_active=False)
    operator = page_client(carol)
    listing = operator.get("/admin/auth/user/?approval=pending").content.decode()
    assert "erin" in listing and ">alice<" not in listing  # only those waiting
    operator.post("/admin/auth/user/", {"action": "approve", "_selected_action": [pending.pk]})
    pending.refresh_from_db()
    assert pending.is_active and Client().login(username="erin", password=PASSWORD)


def test_a_deactivated_user_is_logged_out_and_their_tokens_stop_working(carol: User, alice: User) -> None:
    browser = page_client(alice)
    token = issue_token(alice)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get("/api/v1/jobs").status_code == 200 and browser.get("/profile/").status_code == 200
    operator = page_client(carol)
    done = operator.post("/admin/auth/user/", {"action": "deactivate", "_selected_action": [alice.pk, carol.pk]},
                         follow=True)  # fmt: skip
    assert "Deactivated 1 account(s) (not you)" in done.content.decode()
    alice.refresh_from_db()
    carol.refresh_from_db()
    assert not alice.is_active and carol.is_active  # the operator's own tick is passed over
    assert browser.get("/profile/").status_code == 302  # the session no longer authenticates
    assert api.get("/api/v1/jobs").status_code == 401
    assert not ApiToken.objects.valid().filter(user=alice).exists()
    assert not Client().login(username="alice", password=PASSWORD)


def test_the_user_list_shows_who_is_active(carol: User, alice: User) -> None:
    page = page_client(carol).get("/admin/auth/user/").content.decode()
    assert "column-is_active" in page and "column-date_joined" in page and "column-last_login" in page
