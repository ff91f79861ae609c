"""A password change on any path (page, admin, changepassword, reset) revokes the API tokens and other sessions."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper
from rest_framework.test import APIClient

from accounts.models import ApiToken, issue_token
from accounts.services import current_token
from tests.conftest import PASSWORD

NEW_PASSWORD = "a new and much longer passphrase"


def api_with(token: ApiToken) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def assert_revoked(token: ApiToken) -> None:
    response = api_with(token).get("/api/v1/quota")
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


def logged_in_browser(username: str, password: str = PASSWORD) -> Client:
    browser = Client()
    assert browser.login(username=username, password=password)
    return browser


def test_the_password_page_revokes_tokens_and_other_sessions_but_keeps_this_one(alice: User, bob: User) -> None:
    token, other_token, bobs = issue_token(alice), issue_token(alice), issue_token(bob)
    here, elsewhere = logged_in_browser("alice"), logged_in_browser("alice")
    response = here.post("/profile/password/", {"old_password": PASSWORD, "new_password1": NEW_PASSWORD,
                                                "new_password2": NEW_PASSWORD})  # fmt: skip
    assert response.status_code == 302 and response["Location"] == "/profile/"
    assert_revoked(token)
    assert_revoked(other_token)
    assert api_with(bobs).get("/api/v1/quota").status_code == 200  # only alice's
    assert here.get("/profile/").status_code == 200
    assert elsewhere.get("/profile/").status_code == 302  # sent to the login page


def test_a_wrong_old_password_changes_nothing(alice: User) -> None:
    token = issue_token(alice)
    response = logged_in_browser("alice").post(
        "/profile/password/", {"old_password": "guess", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert response.status_code == 200 and "incorrectly" in response.content.decode()
    assert api_with(token).get("/api/v1/quota").status_code == 200


def test_the_admins_password_form_revokes_tokens_and_sessions(carol: User, alice: User) -> None:
    token, alices_browser = issue_token(alice), logged_in_browser("alice")
    admin = logged_in_browser("carol")
    form = {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"}
    response = admin.post(f"/admin/auth/user/{alice.pk}/password/", form)
    assert response.status_code == 302
    assert_revoked(token)
    assert alices_browser.get("/profile/").status_code == 302
    assert admin.get("/admin/").status_code == 200  # the operator's own session is another user's


def test_an_admin_edit_that_keeps_the_password_keeps_the_tokens(carol: User, alice: User) -> None:
    token = issue_token(alice)
    response = logged_in_browser("carol").post(f"/admin/auth/user/{alice.pk}/change/", {
        "username": "alice", "email": "alice@new.example", "first_name": "Alice", "last_name": "",
        "is_active": "on", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
    })  # fmt: skip
    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.first_name == "Alice"
    assert api_with(token).get("/api/v1/quota").status_code == 200


def test_the_admins_own_password_change_revokes_the_operators_tokens(carol: User) -> None:
    token = issue_token(carol)
    response = logged_in_browser("carol").post("/admin/password_change/", {
        "old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD,
    })  # fmt: skip
    assert response.status_code == 302
    assert_revoked(token)


def test_manage_py_changepassword_revokes(alice: User, monkeypatch: pytest.MonkeyPatch) -> None:
    token = issue_token(alice)
    # The command reads the new password twice from the terminal (getpass).
    monkeypatch.setattr("django.contrib.auth.management.commands.changepassword.getpass.getpass",
                        lambda prompt="": NEW_PASSWORD)  # fmt: skip
    call_command("changepassword", "alice", stdout=io.StringIO())
    assert_revoked(token)


def test_a_password_reset_revokes(alice: User) -> None:
    token = issue_token(alice)
    # What PasswordResetConfirmView does with a valid link (the portal has no reset page yet: an
    # operator sets a password in the admin): SetPasswordForm on the user.
    form = SetPasswordForm(alice, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert form.is_valid(), form.errors
    form.save()
    assert_revoked(token)


def test_a_login_with_the_new_password_gets_a_new_token(alice: User, anon_api: APIClient) -> None:
    old = anon_api.post("/api/v1/auth/token", {"username": "alice", "password": PASSWORD}, format="json").json()
    alice.set_password(NEW_PASSWORD)
    alice.save()
    new = anon_api.post("/api/v1/auth/token", {"username": "alice", "password": NEW_PASSWORD}, format="json").json()
    assert new["token"] != old["token"]
    anon_api.credentials(HTTP_AUTHORIZATION=f"Token {new['token']}")
    assert anon_api.get("/api/v1/quota").status_code == 200
    legacy = anon_api.post("/api-token-auth/", {"username": "alice", "password": NEW_PASSWORD}, format="json")
    assert legacy.json()["token"] == new["token"]


def test_a_hash_upgrade_at_login_is_not_a_password_change(alice: User, settings: SettingsWrapper) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                                 "django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # fmt: skip
    User.objects.filter(pk=alice.pk).update(password=make_password(PASSWORD, hasher="pbkdf2_sha256"))
    token = issue_token(alice)
    alice.refresh_from_db()
    # A correct password under an older hasher is re-hashed with the preferred one and saved.
    assert alice.check_password(PASSWORD)
    alice.refresh_from_db()
    assert alice.password.startswith("md5$")
    assert api_with(token).get("/api/v1/quota").status_code == 200


def test_a_login_whose_password_was_checked_just_before_a_change_gets_no_token(alice: User) -> None:
    checked = authenticate(username="alice", password=PASSWORD)  # the login's check, with the old password
    assert checked is not None
    changed = User.objects.get(pk=alice.pk)
    changed.set_password("a-new-password-42")
    changed.save()  # lands between the check and the token: every token of alice is revoked
    with pytest.raises(PermissionDenied, match="password changed"):
        current_token(checked)
    assert not ApiToken.objects.valid().filter(user=alice).exists()
