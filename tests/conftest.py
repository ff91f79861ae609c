"""Shared fixtures: the personas every route is tried with.

Alice is a normal user, Bob is another normal user who must never see Alice's things, Carol is an
operator (staff), and anonymous has no credentials at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from accounts.models import ApiToken, issue_token
from datacenters.models import Datacenter, Engine, StorageKind

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Login throttling counts live in the cache; each test starts from zero.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(db: None) -> User:
    return User.objects.create_user("alice", "alice@example.com", PASSWORD)


@pytest.fixture
def bob(db: None) -> User:
    return User.objects.create_user("bob", "bob@example.com", PASSWORD)


@pytest.fixture
def carol(db: None) -> User:
    return User.objects.create_user("carol", "carol@example.com", PASSWORD, is_staff=True, is_superuser=True)


@pytest.fixture
def local_dc(db: None, tmp_path: Path) -> Datacenter:
    root = tmp_path / "pfs" / "local"
    (root / "home").mkdir(parents=True)
    (root / "public").mkdir()
    # A large capacity: tests not about scheduling must not queue behind each other on a 2-core CI host
    # (the scheduler's own tests set theirs; tests/jobs/test_scheduler*.py).
    return Datacenter.objects.create(
        name="local", engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL, storage_root=str(root),
        capacity_cpu="256", capacity_memory="1Ti",
    )  # fmt: skip


def client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        token: ApiToken = issue_token(user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def alice_api(alice: User) -> APIClient:
    return client_for(alice)


@pytest.fixture
def bob_api(bob: User) -> APIClient:
    return client_for(bob)


@pytest.fixture
def carol_api(carol: User) -> APIClient:
    return client_for(carol)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()
