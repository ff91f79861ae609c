"""The cache keeps JSON: a pickle planted under a key the portal reads is a miss, never run."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_client
from django.contrib.auth.models import User
from django.core.cache.backends.filebased import FileBasedCache as PicklingFileBasedCache
from pytest_django.fixtures import Settings as SettingsWrapper
from rest_framework.test import APIClient

from core.cache import FileBasedCache, RedisCache
from tests.accounts.test_throttle import parallel_guesses

# The CI services' Redis; a database of its own and a prefix per run, so nothing else is touched.
REDIS_URL = os.environ.get("PADDLECLOUD_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")


class Payload:
    """What an attacker plants: unpickling it creates `marker` (a command could run as well)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


@pytest.fixture
def redis_cache() -> Iterator[RedisCache]:
    try:
        redis_client.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis_client.RedisError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the CI Redis at {REDIS_URL} does not answer: {exc}")
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    cache = RedisCache(REDIS_URL, {"KEY_PREFIX": f"cache-test-{os.getpid()}"})
    yield cache
    raw = redis_client.Redis.from_url(REDIS_URL)
    for key in raw.scan_iter(f"cache-test-{os.getpid()}:*"):
        raw.delete(key)


def test_redis_values_round_trip_as_json(redis_cache: RedisCache) -> None:
    redis_cache.set("login-failures:user:x", [1.5, 2.5], 60)
    assert redis_cache.get("login-failures:user:x") == [1.5, 2.5]
    raw = redis_client.Redis.from_url(REDIS_URL).get(redis_cache.make_and_validate_key("login-failures:user:x"))
    assert raw == b"[1.5,2.5]"
    redis_cache.set("count", 1, 60)
    assert redis_cache.incr("count") == 2
    assert redis_cache.get_many(["count", "login-failures:user:x", "absent"]) == {
        "count": 2, "login-failures:user:x": [1.5, 2.5]
    }  # fmt: skip


def test_a_pickle_planted_in_redis_is_a_miss_and_never_runs(redis_cache: RedisCache, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    planted = pickle.dumps(Payload(marker))
    raw = redis_client.Redis.from_url(REDIS_URL)
    for name in ("login-failures:addr:127.0.0.1", "other"):
        raw.set(redis_cache.make_and_validate_key(name), planted)
    assert redis_cache.get("login-failures:addr:127.0.0.1", []) == []
    assert redis_cache.get_many(["login-failures:addr:127.0.0.1", "other"]) == {}
    assert not marker.exists()


def test_the_payload_is_real_django_s_own_file_cache_runs_it(tmp_path: Path) -> None:
    """So the tests around prove something: the stock backend executes the planted value."""
    marker = tmp_path / "ran"
    stock = PicklingFileBasedCache(str(tmp_path / "stock"), {})
    stock.set("key", Payload(marker), 60)
    assert not marker.exists()
    stock.get("key")
    assert marker.exists()


def test_a_pickle_planted_in_the_file_cache_is_a_miss_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    cache = FileBasedCache(str(tmp_path / "cache"), {})
    cache.set("login-failures:addr:127.0.0.1", [1.0], 60)
    assert cache.get("login-failures:addr:127.0.0.1") == [1.0]
    (path,) = (tmp_path / "cache").glob("*.djcache")
    expiry, value = path.read_bytes().split(b"\n")  # a JSON expiry line, then the JSON value
    assert float(expiry) > 0 and value == b"[1.0]"
    # What Django's own file cache writes: a pickled expiry, then the pickled value.
    path.write_bytes(pickle.dumps(None) + pickle.dumps(Payload(marker)))
    assert cache.get("login-failures:addr:127.0.0.1", "missing") == "missing"
    assert not marker.exists() and not path.exists()  # dropped as not ours
    path.write_bytes(b"null\n" + pickle.dumps(Payload(marker)))
    assert cache.get("login-failures:addr:127.0.0.1", "missing") == "missing"
    assert not marker.exists()


def test_the_file_cache_expires_and_touches(tmp_path: Path) -> None:
    cache = FileBasedCache(str(tmp_path / "cache"), {})
    cache.set("gone", "x", -1)
    assert cache.get("gone") is None
    cache.set("kept", {"a": [1, 2]}, None)
    assert cache.get("kept") == {"a": [1, 2]} and cache.has_key("kept")
    assert cache.touch("kept", 60) and cache.get("kept") == {"a": [1, 2]}
    assert not cache.touch("absent", 60)


def throttle_in_redis(settings: SettingsWrapper) -> None:
    """The portal's cache is the JSON Redis cache (under this run's prefix); 3 failed logins a minute."""
    settings.CACHES = {"default": {"BACKEND": "core.cache.RedisCache", "LOCATION": REDIS_URL,
                                   "KEY_PREFIX": f"cache-test-{os.getpid()}"}}  # fmt: skip
    settings.PADDLECLOUD_LOGIN_RATE = "3/min"


def test_the_login_throttle_counts_in_the_json_redis_cache(
    redis_cache: RedisCache, bob: User, settings: SettingsWrapper
) -> None:
    throttle_in_redis(settings)
    client = APIClient(REMOTE_ADDR="192.0.2.5")
    answers = [client.post("/api/v1/auth/token", {"username": "bob", "password": "guess"}, format="json").status_code
               for _ in range(4)]  # fmt: skip
    assert answers == [401, 401, 401, 429]
    assert len(redis_cache.get("login-failures:addr:192.0.2.5")) == 3


@pytest.mark.django_db(transaction=True)
def test_parallel_guesses_in_the_redis_cache_get_no_more_password_checks_than_the_rate(
    redis_cache: RedisCache, carol: User, settings: SettingsWrapper
) -> None:
    throttle_in_redis(settings)
    assert parallel_guesses(20) == [401] * 3 + [429] * 17
