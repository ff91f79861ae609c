"""Login throttling: one rule for the API, the login page and the admin login.

Failed logins are counted per client address and per username in the default cache (Redis when
PADDLECLOUD_CACHE_URL is set, so every web host shares them). When either count reaches the
PADDLECLOUD_LOGIN_RATE limit within its window, further logins are refused before any password is
checked. A successful login clears its username's count; the address count is left alone, so an
attacker who owns one account cannot wipe the count of the guesses they make at others.
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


def _keys(request: HttpRequest, username: str) -> list[str]:
    # Hashed: a username may hold any character, and cache keys must not.
    user_hash = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return [f"login-failures:addr:{client_address(request)}", f"login-failures:user:{user_hash}"]


def _recent(key: str, now: float, window: int) -> list[float]:
    return [stamp for stamp in cache.get(key, []) if stamp > now - window]


def wait_seconds(request: HttpRequest, username: str) -> int | None:
    """Seconds until this address and username may try again, or None if they may now."""
    limit, window = parse_rate(settings.PADDLECLOUD_LOGIN_RATE)
    now = time.time()
    waits = []
    for key in _keys(request, username):
        failures = _recent(key, now, window)
        if len(failures) >= limit:
            waits.append(failures[-limit] + window - now)
    return max(1, math.ceil(max(waits))) if waits else None


def record_failure(request: HttpRequest, username: str) -> None:
    limit, window = parse_rate(settings.PADDLECLOUD_LOGIN_RATE)
    now = time.time()
    for key in _keys(request, username):
        # Only the newest `limit` failures matter, so the list never grows past that.
        cache.set(key, [*_recent(key, now, window), now][-limit:], window)


def record_success(request: HttpRequest, username: str) -> None:
    cache.delete(_keys(request, username)[1])


REASON = "Login throttled: too many failed logins for this account or from this address."


def message(wait: int) -> str:
    return f"{REASON} Try again in {wait} seconds."
