"""When each datacenter was last reconciled, how long it took and whether it failed: one cache entry each.

Written by the reconcile task after every datacenter's pass and read by the operators' health page.
The cache (shared by every process; JSON values) is enough: it is the last run only, and a lost entry
reads as "not since the cache was emptied" until the next tick (seconds later) writes it again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.cache import cache

KEEP_SECONDS = 7 * 24 * 3600  # an entry this old means the reconciler has not run for a week


def _key(datacenter_id: int) -> str:
    return f"reconcile-run:{datacenter_id}"


def record(datacenter_id: int, started: datetime, seconds: float, error: str = "") -> None:
    entry = {"at": started.isoformat(), "seconds": round(seconds, 3), "error": error[:300]}
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
