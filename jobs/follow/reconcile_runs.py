"""When each datacenter was last reconciled, how long it took, whether it failed; its recent engine errors.

Written by the reconcile task after every datacenter's pass (and by the tasks that meet an engine's error),
read by the operators' health page. Texts are redacted (tokens, passwords, URL credentials) before kept.
The cache (shared by every process; JSON values) is enough: it is the last run only, and a lost entry
reads as "not since the cache was emptied" until the next tick (seconds later) writes it again.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.utils import timezone

KEEP_SECONDS = 7 * 24 * 3600  # an entry this old means the reconciler has not run for a week
MAX_ERRORS = 10  # distinct engine errors kept per datacenter, the most recent
MAX_TEXT = 300
_BEARER = re.compile(r"(?i)\b(bearer)\s+[^\s\"',;]+")
_CREDENTIAL_WORDS = r"token|passw(?:or)?d|secret|api[_-]?key|authorization"  # words that name a value to hide
_NAMED = re.compile(rf"(?i)\b({_CREDENTIAL_WORDS})([\"']?\s*[=:]\s*[\"']?)[^\s\"',;}}]+")
_URL_USER = re.compile(r"(://[^/\s:@]+):[^@\s/]+@")


def redact(text: str) -> str:
    """`text` without what looks like a credential: an engine's error may quote a header, a URL or a config."""
    text = _BEARER.sub(r"\1 [redacted]", text)
    text = _NAMED.sub(r"\1\2[redacted]", text)
    return _URL_USER.sub(r"\1:[redacted]@", text)


def _key(datacenter_id: int) -> str:
    return f"reconcile-run:{datacenter_id}"


def record(datacenter_id: int, started: datetime, seconds: float, error: str = "") -> None:
    entry = {"at": started.isoformat(), "seconds": round(seconds, 3), "error": redact(error)[:MAX_TEXT]}
    cache.set(_key(datacenter_id), entry, timeout=KEEP_SECONDS)


def last(datacenter_id: int) -> dict[str, Any] | None:
    """{"at": datetime, "seconds": float, "error": str} of the last pass, or None if none is known."""
    entry = cache.get(_key(datacenter_id))
    if not isinstance(entry, dict):
        return None
    try:
        return {"at": datetime.fromisoformat(entry["at"]), "seconds": float(entry["seconds"]),
                "error": str(entry.get("error", ""))}
    except (KeyError, TypeError, ValueError):
        return None  # not what record wrote: as if unknown


def _errors_key(datacenter_id: int) -> str:
    return f"engine-errors:{datacenter_id}"


def engine_error(datacenter_id: int, error: str, now: datetime | None = None) -> None:
    """Remember an engine's error: the same text again counts up; MAX_ERRORS distinct ones, the latest, are kept.

    Read, change, write: two processes at once may lose one count, which a health view can afford.
    """
    text, at = redact(" ".join(error.split()))[:MAX_TEXT], now or timezone.now()
    entries = engine_errors(datacenter_id)  # what is readable of it: anything else is dropped here
    same = next((e for e in entries if e["error"] == text), None)
    first, count = (same["first"], int(same["count"])) if same else (at, 0)
    kept = [{"error": text, "first": first, "last": at, "count": count + 1},
            *(e for e in entries if e["error"] != text)][:MAX_ERRORS]
    stored = [{**e, "first": e["first"].isoformat(), "last": e["last"].isoformat()} for e in kept]
    cache.set(_errors_key(datacenter_id), stored, timeout=KEEP_SECONDS)


def _entries(value: Any) -> list[dict[str, Any]]:
    """The stored list as engine_error wrote it; anything else in it is dropped."""
    if not isinstance(value, list):
        return []
    return [e for e in value if isinstance(e, dict) and {"error", "first", "last", "count"} <= e.keys()]


def engine_errors(datacenter_id: int) -> list[dict[str, Any]]:
    """[{"error": str, "first": datetime, "last": datetime, "count": int}], the latest first."""
    found = []
    for entry in _entries(cache.get(_errors_key(datacenter_id))):
        try:
            found.append({"error": str(entry["error"]), "first": datetime.fromisoformat(entry["first"]),
                          "last": datetime.fromisoformat(entry["last"]), "count": int(entry["count"])})
        except (TypeError, ValueError):
            continue  # not what engine_error wrote: left out
    return found
