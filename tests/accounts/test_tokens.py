"""Token API: log in for a token, the legacy endpoint, expiry, revocation and throttling."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from tests.conftest import PASSWORD


def test_legacy_endpoint_returns_a_token_that_authenticates(alice: User, anon_api: APIClient) -> None:
    response = anon_api.post("/api-token-auth/", {"username": "alice", "password": PASSWORD}, format="json")
    assert response.status_code == 200
    assert set(response.json()) == {"token"}
    anon_api.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert anon_api.get("/api/v1/quota").status_code == 200


def test_v1_token_endpoint_returns_expiry_and_the_same_token_on_relogin(alice: User, anon_api: APIClient) -> None:
    first = anon_api.post("/api/v1/auth/token", {"username": "alice", "password": PASSWORD}, format="json").json()
    second = anon_api.post("/api/v1/auth/token", {"username": "alice", "password": PASSWORD}, format="json").json()
    assert first["token"] == second["token"]
    assert first["username"] == "alice"
    expires = datetime.fromisoformat(first["expires_at"])
    assert timedelta(days=29) < expires - timezone.now() <= timedelta(days=30)


def test_bearer_keyword_is_accepted(alice: User, anon_api: APIClient) -> None:
    token = anon_api.post("/api/v1/auth/token", {"username": "alice", "password": PASSWORD}, format="json").json()
    anon_api.credentials(HTTP_AUTHORIZATION=f"Bearer {token['token']}")
    assert anon_api.get("/api/v1/datacenters").status_code == 200


def test_expired_token_is_refused_with_a_clear_message(alice_api: APIClient, alice: User) -> None:
    ApiToken.objects.filter(user=alice).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = alice_api.get("/api/v1/quota")
    assert response.status_code == 401
    assert "token expired" in response.json()["detail"]


def test_revoked_token_is_refused_and_login_issues_a_new_one(alice_api: APIClient, anon_api: APIClient) -> None:
    assert alice_api.delete("/api/v1/auth/token").status_code == 204
    response = alice_api.get("/api/v1/quota")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]
    fresh = anon_api.post("/api/v1/auth/token", {"username": "alice", "password": PASSWORD}, format="json").json()
    anon_api.credentials(HTTP_AUTHORIZATION=f"Token {fresh['token']}")
    assert anon_api.get("/api/v1/quota").status_code == 200


def test_login_of_an_account_awaiting_approval_says_so(db: None, anon_api: APIClient) -> None:
    User.objects.create_user("newbie", "n@example.com", PASSWORD, is_active=False)
    response = anon_api.post("/api/v1/auth/token", {"username": "newbie", "password": PASSWORD}, format="json")
    assert response.status_code == 403
    assert "approve" in response.json()["detail"]
    wrong = anon_api.post("/api/v1/auth/token", {"username": "newbie", "password": "nope"}, format="json")
    assert wrong.status_code == 401  # the wrong password reveals nothing about the account


@pytest.mark.parametrize("endpoint", ["/api-token-auth/", "/api/v1/auth/token"])
def test_login_attempts_are_throttled(alice: User, anon_api: APIClient, endpoint: str, settings: object) -> None:
    codes = [
        anon_api.post(endpoint, {"username": "alice", "password": "guess"}, format="json").status_code
        for _ in range(12)
    ]
    assert codes[:10] == [401] * 10
    assert codes[10:] == [429, 429]
    throttled = anon_api.post(endpoint, {"username": "alice", "password": PASSWORD}, format="json")
    assert throttled.status_code == 429
    assert "throttled" in throttled.json()["detail"].lower()


def test_token_key_is_stored_hashed_and_encrypted(alice_api: APIClient, alice: User) -> None:
    token = ApiToken.objects.get(user=alice)
    with connection.cursor() as cursor:
        cursor.execute("SELECT key_hash, key FROM accounts_apitoken WHERE id = %s", [token.pk])
        key_hash, stored = cursor.fetchone()
    assert token.key not in key_hash
    assert token.key not in stored
