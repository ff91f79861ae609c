"""The job list's sort orders and its sortable column headers (`/jobs/?sort=`), one table of both."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F, OrderBy
from django.http import QueryDict

# sort key -> the order it gives; a key with "-" is the column's other direction. Ties go newest first.
_NEWEST = (F("created_at").desc(), F("pk").desc())
SORTS: dict[str, tuple[OrderBy, ...]] = {
    "-submitted": _NEWEST,
    "submitted": (F("created_at").asc(), F("pk").asc()),
    "name": (F("name").asc(), *_NEWEST),
    "-name": (F("name").desc(), *_NEWEST),
    "state": (F("state").asc(), *_NEWEST),
    "-state": (F("state").desc(), *_NEWEST),
    "datacenter": (F("datacenter__name").asc(), *_NEWEST),
    "-datacenter": (F("datacenter__name").desc(), *_NEWEST),
    # Not started yet (no time) last either way: "the latest started" and "the longest running" both mean started.
    "-started": (F("started_at").desc(nulls_last=True), *_NEWEST),
    "started": (F("started_at").asc(nulls_last=True), *_NEWEST),
}
DEFAULT_SORT = "-submitted"
SORT_CHOICES = [
    ("-submitted", "newest first"), ("submitted", "oldest first"), ("name", "name A-Z"), ("-name", "name Z-A"),
    ("state", "state A-Z"), ("-state", "state Z-A"), ("datacenter", "datacenter A-Z"),
    ("-datacenter", "datacenter Z-A"), ("-started", "latest started"), ("started", "earliest started"),
]  # fmt: skip
# The column -> the direction a first click sorts it (names read A-Z; times newest first).
FIRST_CLICK = {"name": "name", "state": "state", "datacenter": "datacenter", "started": "-started"}


@dataclass(frozen=True)
class Header:
    """One sortable column header: the link that sorts by it (the other direction when it is the sort now)."""

    href: str
    aria_sort: str  # "ascending" / "descending" / "none", for the th's aria-sort


def headers(query: QueryDict, current: str) -> dict[str, Header]:
    """Each sortable column's header for the list as filtered by `query` (its page dropped: a new sort starts at 1)."""
    out = {}
    for column, first in FIRST_CLICK.items():
        now = current.lstrip("-") == column
        target = (current[1:] if current.startswith("-") else f"-{current}") if now else first
        linked = query.copy()
        linked.pop("page", None)
        linked["sort"] = target
        direction = ("descending" if current.startswith("-") else "ascending") if now else "none"
        out[column] = Header(f"?{linked.urlencode()}", direction)
    return out
