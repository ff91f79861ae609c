"""Login throttling: the login page, the admin login and the API share one rule.

Counted per (address, username), per username and per address; the fixture's rates are 3, 6 and 12 a minute.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from accounts.throttle import parse_rate
from tests.conftest import PASSWORD

if TYPE_CHECKING:  # the test client's response type exists only in django-stubs
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

ROUTES = ["/login/", "/admin/login/", "/api/v1/auth/token"]


@pytest.fixture(autouse=True)
def _small_rates(settings: SettingsWrapper) -> None:
    settings.PADDLECLOUD_LOGIN_RATE = "3/min"  # per (address, username)
    settings.PADDLECLOUD_LOGIN_USER_RATE = "6/min"
    settings.PADDLECLOUD_LOGIN_ADDRESS_RATE = "12/min"


def attempt(route: str, username: str, password: str, address: str = "192.0.2.1", **headers: str) -> TestResponse:
    client = Client(REMOTE_ADDR=address, headers=headers)
    if route.startswith("/api"):
        return client.post(route, {"username": username, "password": password}, content_type="application/json")
    return client.post(route, {"username": username, "password": password})


def refused_as_wrong(route: str, response: TestResponse) -> bool:
    return response.status_code == (401 if route.startswith("/api") else 200)


def logged_in(route: str, response: TestResponse) -> bool:
    return response.status_code == (200 if route.startswith("/api") else 302)


def assert_throttled(route: str, response: TestResponse) -> None:
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    text = response.json()["detail"] if route.startswith("/api") else response.content.decode()
    assert "too many failed logins" in text.lower()


@pytest.mark.parametrize("route", ROUTES)
def test_failed_logins_for_one_username_are_throttled_from_any_address(carol: User, route: str) -> None:
    for index in range(6):
        assert refused_as_wrong(route, attempt(route, "carol", "guess", address=f"192.0.2.{index + 10}"))
    assert_throttled(route, attempt(route, "carol", "guess", address="198.51.100.7"))
    # Refused before the password is checked: even the right one waits.
    assert_throttled(route, attempt(route, "carol", PASSWORD, address="198.51.100.8"))


@pytest.mark.parametrize("route", ROUTES)
def test_failed_logins_for_one_username_from_one_address_are_throttled_there_only(carol: User, route: str) -> None:
    for _ in range(3):
        assert refused_as_wrong(route, attempt(route, "carol", "guess"))
    assert_throttled(route, attempt(route, "carol", PASSWORD))
    assert logged_in(route, attempt(route, "carol", PASSWORD, address="192.0.2.99"))


@pytest.mark.parametrize("route", ROUTES)
def test_failed_logins_from_one_address_are_throttled_for_any_username(carol: User, route: str) -> None:
    for index in range(12):
        assert refused_as_wrong(route, attempt(route, f"sprayed{index}", "guess"))
    assert_throttled(route, attempt(route, "carol", PASSWORD))
    assert logged_in(route, attempt(route, "carol", PASSWORD, address="192.0.2.99"))


@pytest.mark.parametrize("route", ROUTES)
def test_a_successful_login_resets_the_usernames_count(carol: User, route: str) -> None:
    for index in range(5):
        attempt(route, "carol", "guess", address=f"192.0.2.{index + 10}")
    assert logged_in(route, attempt(route, "carol", PASSWORD, address="192.0.2.20"))
    for index in range(6):
        assert refused_as_wrong(route, attempt(route, "carol", "typo", address=f"192.0.2.{index + 30}"))
    assert_throttled(route, attempt(route, "carol", "typo", address="192.0.2.40"))


def test_a_successful_login_keeps_the_addresss_count(alice: User, bob: User) -> None:
    # Otherwise owning one account would buy unlimited guesses at everyone else's.
    for index in range(11):
        attempt("/login/", f"victim{index}", "guess")
    assert logged_in("/login/", attempt("/login/", "alice", PASSWORD))
    attempt("/login/", "dave", "guess")
    assert_throttled("/login/", attempt("/login/", "bob", PASSWORD))


def test_the_login_page_the_admin_and_the_api_count_together(carol: User) -> None:
    attempt("/login/", "carol", "guess")
    attempt("/admin/login/", "carol", "guess")
    attempt("/api/v1/auth/token", "carol", "guess")
    for route in ROUTES:
        assert_throttled(route, attempt(route, "carol", PASSWORD))


@pytest.mark.parametrize("route", ["/login/", "/api/v1/auth/token", "/api-token-auth/"])
def test_made_up_usernames_from_a_shared_address_do_not_lock_out_another_user(
    bob: User, route: str, settings: SettingsWrapper
) -> None:
    # The shipped rates, and everyone on 127.0.0.1 as in the embedded portal (a job could send these).
    settings.PADDLECLOUD_LOGIN_RATE, settings.PADDLECLOUD_LOGIN_USER_RATE = "10/min", "30/min"
    settings.PADDLECLOUD_LOGIN_ADDRESS_RATE = "100/min"
    for index in range(15):
        assert refused_as_wrong(route, attempt(route, f"nobody{index}", "guess", address="127.0.0.1"))
    assert logged_in(route, attempt(route, "bob", PASSWORD, address="127.0.0.1"))


@pytest.mark.parametrize("route", ["/login/", "/api/v1/auth/token"])
def test_guessing_one_password_from_a_shared_address_is_still_throttled(
    bob: User, route: str, settings: SettingsWrapper
) -> None:
    settings.PADDLECLOUD_LOGIN_RATE, settings.PADDLECLOUD_LOGIN_USER_RATE = "10/min", "30/min"
    settings.PADDLECLOUD_LOGIN_ADDRESS_RATE = "100/min"
    for index in range(10):
        assert refused_as_wrong(route, attempt(route, "bob", f"guess{index}", address="127.0.0.1"))
    assert_throttled(route, attempt(route, "bob", PASSWORD, address="127.0.0.1"))


def test_a_non_staff_user_on_the_admin_login_is_refused_but_not_counted_as_a_guess(alice: User) -> None:
    for _ in range(4):
        response = attempt("/admin/login/", "alice", PASSWORD, address="192.0.2.50")
        assert response.status_code == 200 and "staff account" in response.content.decode()
    assert logged_in("/login/", attempt("/login/", "alice", PASSWORD, address="192.0.2.51"))


def test_a_forged_forwarded_for_header_does_not_escape_the_address_count(alice: User) -> None:
    for index in range(12):
        attempt("/login/", f"user{index}", "guess", X_Forwarded_For=f"203.0.113.{index}")
    assert_throttled("/login/", attempt("/login/", "alice", PASSWORD, X_Forwarded_For="203.0.113.200"))


def test_behind_a_trusted_proxy_the_forwarded_address_is_counted(alice: User, settings: SettingsWrapper) -> None:
    settings.PADDLECLOUD_TRUSTED_PROXIES = 1
    for index in range(12):
        attempt("/login/", f"user{index}", "guess", address="10.0.0.1", X_Forwarded_For="203.0.113.5")
    assert_throttled(
        "/login/", attempt("/login/", "alice", PASSWORD, address="10.0.0.1", X_Forwarded_For="203.0.113.5")
    )
    assert logged_in(
        "/login/", attempt("/login/", "alice", PASSWORD, address="10.0.0.1", X_Forwarded_For="spoofed, 203.0.113.6")
    )


@pytest.mark.parametrize(
    ("rate", "parsed"), [("10/min", (10, 60)), ("5/s", (5, 1)), ("100/hour", (100, 3600)), ("1/day", (1, 86400))]
)
def test_rates_use_drfs_syntax(rate: str, parsed: tuple[int, int]) -> None:
    assert parse_rate(rate) == parsed


@pytest.mark.parametrize("rate", ["ten/min", "10", "10/week", "0/min", ""])
def test_a_bad_rate_is_refused(rate: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        parse_rate(rate)


def parallel_guesses(count: int, route: str = "/api/v1/auth/token") -> list[int]:
    """`count` wrong passwords for carol from one address, all sent at the same moment; their statuses."""
    barrier = threading.Barrier(count)
    statuses: list[int] = []

    def guess(index: int) -> None:
        barrier.wait()
        statuses.append(attempt(route, "carol", f"guess-{index}").status_code)

    threads = [threading.Thread(target=guess, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(statuses)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "backend", ["django.core.cache.backends.filebased.FileBasedCache", "core.cache.FileBasedCache"]
)
@pytest.mark.parametrize("route", ["/login/", "/api/v1/auth/token"])
def test_parallel_guesses_get_no_more_password_checks_than_the_rate(
    carol: User, route: str, backend: str, settings: SettingsWrapper, tmp_path: Path
) -> None:
    # Django's own file cache has no lock: the throttle's process lock; core.cache's: its flock.
    settings.CACHES = {"default": {"BACKEND": backend, "LOCATION": str(tmp_path / "cache")}}
    statuses = parallel_guesses(20, route)
    wrong = 401 if route.startswith("/api") else 200
    assert statuses == [wrong] * 3 + [429] * 17  # the per-(address, username) rate: 3 checked, 17 refused
