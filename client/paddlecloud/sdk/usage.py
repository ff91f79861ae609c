"""Accounting from a script: core-, GiB- and GPU-hours held per user, team or day (GET /api/v1/usage).

    from paddlecloud.sdk.session import Session
    from paddlecloud.sdk.usage import usage
    report = usage(Session.from_config(), since="2026-01-01", group_by="day")
    for row in report["results"]:
        print(row["key"], row["cpu_core_hours"])
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from paddlecloud.sdk.session import Session

GROUPS = ("user", "team", "day", "job")


def _when(value: str | date | datetime | None) -> str | None:
    """A date is a UTC day (YYYY-MM-DD); a datetime goes as ISO 8601 (the portal takes a naive one as UTC)."""
    if value is None or isinstance(value, str):
        return value
    return value.isoformat()


def usage_params(
    datacenter: str | None = None,
    since: str | date | datetime | None = None,
    until: str | date | datetime | None = None,
    group_by: str = "user",
    user: str | None = None,
) -> dict[str, str]:
    """The query of one usage report; left-out values take the portal's defaults (the last 30 days)."""
    params = {"datacenter": datacenter, "since": _when(since), "until": _when(until), "group_by": group_by,
              "user": user}  # fmt: skip
    return {key: value for key, value in params.items() if value is not None}


def usage(session: Session, **query: Any) -> dict[str, Any]:
    """The report as JSON: {datacenter, since, until, group_by, results: [{key, cpu_core_hours, ...}]}.

    `query` is usage_params's: datacenter (default: every one), since, until, group_by, user (operators).
    """
    report: dict[str, Any] = session.get("/usage", usage_params(**query))
    return report


def usage_csv(session: Session, **query: Any) -> str:
    """The same report as the portal's CSV download (a header row, then one row per key)."""
    response = session.request("GET", "/usage", params={**usage_params(**query), "format": "csv"},
                               headers={"Accept": "text/csv"})  # fmt: skip
    return response.text
