"""Login throttling: one rule for the API, the login page and the admin login.

Failed logins are counted in the default cache (Redis when PADDLECLOUD_CACHE_URL is set, so every
web host shares them) three ways, each with its own rate:
- per (client address, username), PADDLECLOUD_LOGIN_RATE: one guesser at one account;
- per username from any address, PADDLECLOUD_LOGIN_USER_RATE (higher): guesses spread over addresses;
- per client address over all usernames, PADDLECLOUD_LOGIN_ADDRESS_RATE (much higher): spraying. It is
  high so that made-up usernames from a shared address (127.0.0.1 in the embedded portal, a NAT)
  cannot lock out everyone else there.
When a count reaches its rate within its window, further logins it covers are refused before any
password is checked. A successful login clears its username's two counts; the address count is left
alone, so an attacker who owns one account cannot wipe the count of the guesses they make at others.
"""

from __future__ import annotations

import hashlib
import math
import time

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


def wait_seconds(request: HttpRequest, username: str) -> int | None:
    """Seconds until this address and username may try again, or None if they may now."""
    now = time.time()
    waits = []
    for key, rate in _counters(request, username):
        limit, window = parse_rate(rate)
        failures = _recent(key, now, window)
        if len(failures) >= limit:
            waits.append(failures[-limit] + window - now)
    return max(1, math.ceil(max(waits))) if waits else None


def record_failure(request: HttpRequest, username: str) -> None:
    now = time.time()
    for key, rate in _counters(request, username):
        limit, window = parse_rate(rate)
        # Only the newest `limit` failures matter, so the list never grows past that.
        cache.set(key, [*_recent(key, now, window), now][-limit:], window)


def record_success(request: HttpRequest, username: str) -> None:
    cache.delete_many([key for key, _ in _counters(request, username)[1:]])


REASON = "Login throttled: too many failed logins for this account or from this address."


def message(wait: int) -> str:
    return f"{REASON} Try again in {wait} seconds."
