"""Accounting: what the ledger (`UsageRecord`) says was held over a window, per user, team or UTC day.

Each record counts only the part of it inside the window [since, until): a worker that ran from 23:00 to
01:00 counts one hour on each day, and one hour in a window that ends at midnight. The sums are made here,
over the records the window touches (read in chunks, a few columns each), so one rule clips and groups
for the API, the CSV, paddlectl and the admin alike, on SQLite and PostgreSQL.

Measured use (`cpu_core_hours_used`, `peak_memory_gib`) comes from records whose engine measured it (the
local engine's cgroups); a record's cpu seconds are spread evenly over its span, its peak is a maximum.
Storage GiB-days come from the hourly `StorageSample`s: each sample counts until the next one of its user and
datacenter, at most SAMPLE_SECONDS, clipped to the window.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone

from core.errors import Invalid
from jobs.models import UsageRecord
from storage.models import SAMPLE_SECONDS, StorageSample

GROUPS = ("user", "team", "day", "job")  # job: one row per run (its uid); storage is no job's
NO_TEAM = "(no team)"
DEFAULT_DAYS = 30
MAX_WINDOW = timedelta(days=366)
MIN_YEAR, MAX_YEAR = 1970, 9000
MAX_DATE_TEXT = 40  # characters of a since/until value: an ISO 8601 time with its zone fits
GIB = 1024**3
COLUMNS = ("key", "cpu_core_hours", "memory_gib_hours", "gpu_hours", "jobs", "workers", "cpu_core_hours_used",
           "peak_memory_gib", "storage_gib_days")  # fmt: skip


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime


def parse_time(text: str, field_name: str) -> datetime:
    """YYYY-MM-DD (midnight UTC) or an ISO 8601 time (UTC when it names no zone); else Invalid naming the field."""
    rule = "must be a date (YYYY-MM-DD) or an ISO 8601 time such as 2026-01-31T12:00:00Z"
    if not text or len(text) > MAX_DATE_TEXT:
        raise Invalid(f"{rule}; got {text[:MAX_DATE_TEXT]!r}", field_name)
    try:
        if len(text) == 10:
            when = datetime.combine(date.fromisoformat(text), time(), tzinfo=UTC)
        else:
            when = datetime.fromisoformat(text)
    except ValueError:
        raise Invalid(f"{rule}; got {text!r}", field_name) from None
    if not MIN_YEAR <= when.year <= MAX_YEAR:  # keeps the window's arithmetic inside datetime's range
        raise Invalid(f"must be in the years {MIN_YEAR} to {MAX_YEAR}; got {text!r}", field_name)
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def window(since: str | None, until: str | None, now: datetime | None = None) -> Window:
    """The window asked for: `until` defaults to now, `since` to DEFAULT_DAYS before `until`; at most MAX_WINDOW."""
    end = parse_time(until, "until") if until is not None else (now or timezone.now()).astimezone(UTC)
    start = parse_time(since, "since") if since is not None else end - timedelta(days=DEFAULT_DAYS)
    if start >= end:
        raise Invalid(f"must be before until ({end.isoformat()})", "since")
    if end - start > MAX_WINDOW:
        raise Invalid(f"the window may span at most {MAX_WINDOW.days} days; this one spans {(end - start).days}",
                      "since")  # fmt: skip
    return Window(start, end)


def visible_records(viewer: Any) -> QuerySet[UsageRecord]:
    """The ledger rows `viewer` may read: operators every user's, everyone else their own."""
    rows = UsageRecord.objects.all()
    return rows if getattr(viewer, "is_staff", False) else rows.filter(owner_id=viewer.pk)


@dataclass(frozen=True)
class Scope:
    """The ledger rows and storage samples one report reads: the same viewer, datacenter and user for both."""

    records: QuerySet[UsageRecord]
    samples: QuerySet[StorageSample]


def scope(viewer: Any, datacenter: Any = None, user: Any = None) -> Scope:
    records = visible_records(viewer)
    samples = StorageSample.objects.all()
    if not getattr(viewer, "is_staff", False):
        samples = samples.filter(user_id=viewer.pk)
    if datacenter is not None:
        records, samples = records.filter(datacenter=datacenter), samples.filter(datacenter=datacenter)
    if user is not None:
        records, samples = records.filter(owner=user), samples.filter(user=user)
    return Scope(records, samples)


@dataclass
class _Sum:
    cpu_seconds: float = 0.0
    memory_byte_seconds: float = 0.0
    gpu_seconds: float = 0.0
    jobs: set[str] = field(default_factory=set)
    workers: set[tuple[str, str]] = field(default_factory=set)
    cpu_used_seconds: float = 0.0
    peak_memory: int = 0
    storage_byte_seconds: float = 0.0

    def add(self, item: _Piece) -> None:
        self.cpu_seconds += item.cpu * item.seconds
        self.memory_byte_seconds += item.memory * item.seconds
        self.gpu_seconds += item.gpu * item.seconds
        self.jobs.add(item.job_uid)
        self.workers.add((item.job_uid, item.worker))
        self.cpu_used_seconds += item.cpu_used
        self.peak_memory = max(self.peak_memory, item.peak)

    def row(self, key: str) -> dict[str, Any]:
        return {
            "key": key,
            "cpu_core_hours": round(self.cpu_seconds / 3600, 6),
            "memory_gib_hours": round(self.memory_byte_seconds / GIB / 3600, 6),
            "gpu_hours": round(self.gpu_seconds / 3600, 6),
            "jobs": len(self.jobs),
            "workers": len(self.workers),
            "cpu_core_hours_used": round(self.cpu_used_seconds / 3600, 6),
            "peak_memory_gib": round(self.peak_memory / GIB, 6),
            "storage_gib_days": round(self.storage_byte_seconds / GIB / 86400, 6),
        }


@dataclass(frozen=True)
class _Piece:
    """The part of one record inside the window (or inside one day of it)."""

    owner_id: int
    job_uid: str
    worker: str
    cpu: float
    memory: int
    gpu: int
    start: datetime
    seconds: float
    cpu_used: float = 0.0  # measured cpu seconds in this piece (the record's, spread evenly over its span)
    peak: int = 0  # the record's measured peak memory, bytes


def _pieces(records: QuerySet[UsageRecord], span: Window) -> Iterator[_Piece]:
    touching = records.filter(started_at__lt=span.until, ended_at__gt=span.since).order_by()
    columns = ("owner_id", "job_uid", "worker", "cpu", "memory", "gpu", "started_at", "ended_at", "cpu_seconds_used",
               "peak_memory")  # fmt: skip
    for owner_id, job_uid, worker, cpu, memory, gpu, started, ended, used, peak in touching.values_list(
        *columns
    ).iterator(chunk_size=2000):
        start, end = max(started, span.since), min(ended, span.until)
        if end > start:
            seconds, whole = (end - start).total_seconds(), (ended - started).total_seconds()
            share = (used or 0.0) * (seconds / whole if whole > 0 else 1.0)
            yield _Piece(owner_id, job_uid, worker, float(cpu), memory, gpu, start, seconds, share, peak or 0)


def _by_day(piece: _Piece) -> Iterator[tuple[str, _Piece]]:
    """The piece cut at UTC midnights, each part keyed by its day."""
    start, end = piece.start, piece.start + timedelta(seconds=piece.seconds)
    while start < end:
        midnight = datetime.combine(start.date() + timedelta(days=1), time(), tzinfo=UTC)
        stop = min(midnight, end)
        seconds = (stop - start).total_seconds()
        share = piece.cpu_used * (seconds / piece.seconds if piece.seconds > 0 else 1.0)
        part = _Piece(piece.owner_id, piece.job_uid, piece.worker, piece.cpu, piece.memory, piece.gpu, start,
                      seconds, share, piece.peak)  # fmt: skip
        yield start.date().isoformat(), part
        start = stop


def _usernames(owner_ids: Iterable[int]) -> dict[int, str]:
    return dict(get_user_model().objects.filter(pk__in=set(owner_ids)).values_list("pk", "username"))


def _teams(owner_ids: Iterable[int]) -> dict[int, list[str]]:
    """Each user's Django groups (their teams), NO_TEAM for a user in none."""
    ids = set(owner_ids)
    teams: dict[int, list[str]] = {owner: [] for owner in ids}
    memberships = get_user_model().groups.through.objects.filter(user_id__in=ids)
    for owner, team in memberships.values_list("user_id", "group__name"):
        teams[owner].append(team)
    return {owner: names or [NO_TEAM] for owner, names in teams.items()}


def _stored(samples: QuerySet[StorageSample], span: Window) -> Iterator[_Piece]:
    """Each sample as a piece holding its bytes (in `memory`) until the next sample of its user and datacenter,
    at most SAMPLE_SECONDS, clipped to the window."""
    since = span.since - timedelta(seconds=SAMPLE_SECONDS)
    rows = list(
        samples.filter(taken_at__gte=since, taken_at__lt=span.until)
        .order_by("user_id", "datacenter_id", "taken_at")
        .values_list("user_id", "datacenter_id", "taken_at", "used_bytes")
    )
    for index, (user, datacenter, taken, used) in enumerate(rows):
        ends = taken + timedelta(seconds=SAMPLE_SECONDS)
        if index + 1 < len(rows) and rows[index + 1][:2] == (user, datacenter):
            ends = min(ends, rows[index + 1][2])
        start, end = max(taken, span.since), min(ends, span.until)
        if end > start:
            yield _Piece(user, "", "", 0.0, used, 0, start, (end - start).total_seconds())


def _keyed(piece: _Piece, group_by: str) -> Iterable[tuple[Any, _Piece]]:
    """The piece under its key: its owner's id, each UTC day it spans (cut at midnight), or its job's uid (a
    storage piece has none: it is no job's)."""
    if group_by == "job":
        return [(piece.job_uid, piece)] if piece.job_uid else []
    return _by_day(piece) if group_by == "day" else [(piece.owner_id, piece)]


def _sums(scoped: Scope, span: Window, group_by: str) -> dict[Any, _Sum]:
    return _sums_by(scoped, span, (group_by,))[group_by]


def _sums_by(scoped: Scope, span: Window, groups: tuple[str, ...]) -> dict[str, dict[Any, _Sum]]:
    """Each grouping's sums from one read of the records and samples."""
    sums: dict[str, dict[Any, _Sum]] = {group: defaultdict(_Sum) for group in groups}
    for piece in _pieces(scoped.records, span):
        for group in groups:
            for key, part in _keyed(piece, group):
                sums[group][key].add(part)
    for piece in _stored(scoped.samples, span):
        for group in groups:
            for key, part in _keyed(piece, group):
                sums[group][key].storage_byte_seconds += part.memory * part.seconds
    return sums


def by_day_and_job(scoped: Scope, span: Window) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """usage() by day and by job (the usage page's two tables) from one read of the ledger."""
    sums = _sums_by(scoped, span, ("day", "job"))
    days, jobs = ([sums[group][key].row(key) for key in sorted(sums[group])] for group in ("day", "job"))
    return days, jobs


def usage(scoped: Scope, span: Window, group_by: str) -> list[dict[str, Any]]:
    """One row per user, team (a user in several counts in each), UTC day or job (its uid), in key order; see
    COLUMNS."""
    if group_by not in GROUPS:
        raise Invalid(f"must be one of {', '.join(GROUPS)}", "group_by")
    sums = _sums(scoped, span, group_by)
    if group_by in ("day", "job"):
        return [sums[key].row(key) for key in sorted(sums)]
    if group_by == "user":
        names = _usernames(sums)
        return sorted((total.row(names.get(owner, str(owner))) for owner, total in sums.items()),
                      key=lambda row: row["key"])  # fmt: skip
    by_team: dict[str, _Sum] = defaultdict(_Sum)
    for owner, teams in _teams(sums).items():
        for team in teams:
            _merge(by_team[team], sums[owner])
    return [by_team[team].row(team) for team in sorted(by_team)]


def _merge(into: _Sum, other: _Sum) -> None:
    into.cpu_seconds += other.cpu_seconds
    into.memory_byte_seconds += other.memory_byte_seconds
    into.gpu_seconds += other.gpu_seconds
    into.jobs |= other.jobs
    into.workers |= other.workers
    into.cpu_used_seconds += other.cpu_used_seconds
    into.peak_memory = max(into.peak_memory, other.peak_memory)
    into.storage_byte_seconds += other.storage_byte_seconds
