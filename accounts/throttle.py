"""Login and signup throttling: one rule for the API, the login page and the admin login; one for signups.

Failed logins are counted in the default cache (Redis when PADDLECLOUD_CACHE_URL is set, so every
web host shares them) three ways, each with its own rate:
- per (client address, username), PADDLECLOUD_LOGIN_RATE: one guesser at one account;
- per username from any address, PADDLECLOUD_LOGIN_USER_RATE (higher): guesses spread over addresses;
- per client address over all usernames, PADDLECLOUD_LOGIN_ADDRESS_RATE (much higher): spraying. It is
  high so that made-up usernames from a shared address (127.0.0.1 in the embedded portal, a NAT)
  cannot lock out everyone else there.
When a count reaches its rate within its window, further logins it covers are refused before any
password is checked. Every attempt is counted as a failure before its password is checked, checked and
counted under one lock (the cache's, shared by every web worker): parallel guesses cannot all pass the
check before any of them is counted. A successful login takes its attempt back and clears its
username's two counts; the address count keeps the rest, so an attacker who owns one account cannot
wipe the count of the guesses they make at others.

Signups are counted the same way per client address (PADDLECLOUD_SIGNUP_RATE), so one address cannot make
accounts by the dozen, each with the default quota.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from contextlib import AbstractContextManager

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'10/min' -> (10, 60): DRF's rate syntax (a count, then s, m, h or d, or a word starting so)."""
    count, _, period = rate.partition("/")
    try:
        number = int(count)
        seconds = _PERIODS[period.strip()[:1]]
    except (ValueError, KeyError):
        raise ValueError(f"{rate!r} is not a rate like 10/min") from None
    if number < 1:
        raise ValueError(f"{rate!r} is not a rate: the count must be at least 1")
    return number, seconds


def client_address(request: HttpRequest) -> str:
    """The caller's address: REMOTE_ADDR, or the one the last trusted proxy saw.

    X-Forwarded-For is written by the client too, so only the entries appended by the
    PADDLECLOUD_TRUSTED_PROXIES proxies in front of the portal are believed.
    """
    proxies = settings.PADDLECLOUD_TRUSTED_PROXIES
    forwarded: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [hop.strip() for hop in forwarded.split(",")]
        return hops[-min(proxies, len(hops))][:64]
    return str(request.META.get("REMOTE_ADDR", ""))[:64]


def _counters(request: HttpRequest, username: str) -> list[tuple[str, str]]:
    """(cache key, rate) of each count a failed login of `username` from this request adds to."""
    # Hashed: a username may hold any character, and cache keys must not.
    user = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    address = client_address(request)
    return [
        (f"login-failures:addr:{address}", settings.PADDLECLOUD_LOGIN_ADDRESS_RATE),
        (f"login-failures:user:{user}", settings.PADDLECLOUD_LOGIN_USER_RATE),
        (f"login-failures:addr-user:{address}:{user}", settings.PADDLECLOUD_LOGIN_RATE),
    ]


def _recent(key: str, now: float, window: int) -> list[float]:
    return [stamp for stamp in cache.get(key, []) if stamp > now - window]


# Backends without a lock of their own (not core.cache's): one per process.
_PROCESS_LOCK = threading.Lock()
_ATTEMPT = "_paddlecloud_login_attempt"


def _exclusive() -> AbstractContextManager[object]:
    """The one lock around the counts' read-modify-write: the cache's own (core.cache), else the process's."""
    exclusive = getattr(cache, "exclusive", None)
    return exclusive("login-throttle") if exclusive is not None else _PROCESS_LOCK


def _take(counts: list[tuple[str, str]], now: float) -> int | None:
    """Add `now` to each (cache key, rate) count; None, or (one being full, nothing added) the seconds to wait."""
    counters = [(key, *parse_rate(rate)) for key, rate in counts]
    with _exclusive():
        recent = {key: _recent(key, now, window) for key, _, window in counters}
        waits = [recent[key][-limit] + window - now for key, limit, window in counters if len(recent[key]) >= limit]
        if waits:
            return max(1, math.ceil(max(waits)))
        for key, limit, window in counters:
            # Only the newest `limit` stamps matter, so the list never grows past that.
            cache.set(key, [*recent[key], now][-limit:], window)
    return None


def begin(request: HttpRequest, username: str) -> int | None:
    """Count this attempt as a failed login before its password is checked; None to go on, or (a count
    being full, nothing counted) the seconds until this address and username may try again."""
    now = time.time()
    wait = _take(_counters(request, username), now)
    if wait is None:
        setattr(request, _ATTEMPT, now)
    return wait


def signup(request: HttpRequest) -> int | None:
    """Count an account about to be made from this request's address (PADDLECLOUD_SIGNUP_RATE); None to go on,
    or the seconds until this address may make another. Counted before the account is made, under the lock:
    parallel signups from one address cannot all pass the check."""
    return _take([(f"signups:addr:{client_address(request)}", settings.PADDLECLOUD_SIGNUP_RATE)], time.time())


def succeeded(request: HttpRequest, username: str) -> None:
    """The password was right: take this attempt back from the address's count, clear the username's."""
    (address_key, address_rate), *user_keys = _counters(request, username)
    attempt = getattr(request, _ATTEMPT, None)
    with _exclusive():
        cache.delete_many([key for key, _ in user_keys])
        stamps = cache.get(address_key, [])
        if attempt in stamps:
            stamps.remove(attempt)
            cache.set(address_key, stamps, parse_rate(address_rate)[1])


REASON = "Login throttled: too many failed logins for this account or from this address."


def message(wait: int) -> str:
    return f"{REASON} Try again in {wait} seconds."
