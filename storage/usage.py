"""Storage quota: per-user usage rows changed atomically with every write, checked before any byte lands.

Every change runs inside `ledger()`: one transaction holding the user's usage row locked (SELECT ... FOR
UPDATE on PostgreSQL; SQLite serializes writing transactions), so a check and the change it allows are
one step and concurrent writers cannot both pass a check that only one of them fits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, F, Sum
from django.db.models.functions import Greatest
from django.utils import timezone
from paddlecloud.contract.units import human_bytes

from datacenters import quota
from datacenters.models import Datacenter
from storage import paths
from storage.backends import storage_for
from storage.errors import QuotaExceeded
from storage.models import LIVE_STATES, StorageUsage, Upload


class Ledger:
    """The locked usage of one user in one datacenter, for the duration of a `ledger()` block."""

    def __init__(self, user: Any, datacenter: Datacenter, row: StorageUsage | None) -> None:
        self.user = user
        self.datacenter = datacenter
        self.row = row

    def check(self, add_bytes: int = 0, add_files: int = 0, release_bytes: int = 0, release_files: int = 0) -> None:
        """Refuse (413) a step that adds this much (and frees `release_*` of reservations) past the limits.

        Reservations count as used. A step that does not grow usage is never refused, so a user over a
        lowered quota can still replace a file with a smaller one.
        """
        row = self.row
        if row is None or (add_bytes <= 0 and add_files <= 0):
            return
        limits = quota.limits(self.user, self.datacenter)
        held_bytes = row.used_bytes + row.reserved_bytes - release_bytes
        held_files = row.used_files + row.reserved_files - release_files
        where = f"in datacenter {self.datacenter.name}"
        if add_bytes > 0 and held_bytes + add_bytes > limits.storage:
            raise QuotaExceeded(
                f"storage quota exceeded {where}: this needs {human_bytes(add_bytes)} but only "
                f"{human_bytes(max(limits.storage - held_bytes, 0))} of {human_bytes(limits.storage)} is left "
                f"({human_bytes(row.used_bytes)} used, "
                f"{human_bytes(row.reserved_bytes)} reserved by uploads in progress)"
            )
        if add_files > 0 and held_files + add_files > limits.storage_files:
            raise QuotaExceeded(
                f"file count quota exceeded {where}: this needs {add_files} more entries but only "
                f"{max(limits.storage_files - held_files, 0)} of {limits.storage_files} are left "
                f"({row.used_files} used, {row.reserved_files} reserved by uploads in progress)"
            )

    def apply(self, used_bytes: int = 0, used_files: int = 0, reserved_bytes: int = 0, reserved_files: int = 0) -> None:
        """Add these deltas (atomically, never below zero)."""
        row = self.row
        if row is None or not (used_bytes or used_files or reserved_bytes or reserved_files):
            return
        StorageUsage.objects.filter(pk=row.pk).update(
            used_bytes=Greatest(F("used_bytes") + used_bytes, 0),
            used_files=Greatest(F("used_files") + used_files, 0),
            reserved_bytes=Greatest(F("reserved_bytes") + reserved_bytes, 0),
            reserved_files=Greatest(F("reserved_files") + reserved_files, 0),
            updated_at=timezone.now(),
        )
        row.refresh_from_db()


def _locked_row(user: Any, datacenter: Datacenter) -> StorageUsage:
    StorageUsage.objects.get_or_create(user=user, datacenter=datacenter)
    return StorageUsage.objects.select_for_update().get(user=user, datacenter=datacenter)


@contextmanager
def ledger(user: Any, datacenter: Datacenter, counts: bool = True) -> Iterator[Ledger]:
    """A transaction holding the user's usage row; counts=False (public area) checks and records nothing."""
    with transaction.atomic():
        yield Ledger(user, datacenter, _locked_row(user, datacenter) if counts and user is not None else None)


def record_usage(user: Any, datacenter: Datacenter, bytes_delta: int, files_delta: int) -> None:
    """Record files written or removed outside the portal's API (e.g. by a job), without a limit check."""
    with ledger(user, datacenter) as book:
        book.apply(used_bytes=bytes_delta, used_files=files_delta)


def usage_provider(user: Any, datacenter: Datacenter) -> quota.Amounts:
    """Registered with datacenters.quota: reservations of open uploads count as used."""
    row = StorageUsage.objects.filter(user=user, datacenter=datacenter).first()
    if row is None:
        return quota.Amounts()
    return quota.Amounts(storage=row.used_bytes + row.reserved_bytes, storage_files=row.used_files + row.reserved_files)


@dataclass(frozen=True)
class Drift:
    """Recorded usage against what is on disk (and reserved by live uploads) for one user."""

    username: str
    datacenter: str
    recorded_bytes: int
    actual_bytes: int
    recorded_files: int
    actual_files: int
    recorded_reserved_bytes: int
    actual_reserved_bytes: int
    recorded_reserved_files: int
    actual_reserved_files: int

    @property
    def drifted(self) -> bool:
        return (
            self.recorded_bytes != self.actual_bytes
            or self.recorded_files != self.actual_files
            or self.recorded_reserved_bytes != self.actual_reserved_bytes
            or self.recorded_reserved_files != self.actual_reserved_files
        )


def recompute(datacenter: Datacenter, users: list[Any] | None = None, fix: bool = False) -> list[Drift]:
    """Walk each user's home and compare with the recorded usage; with fix, store what was found.

    Covers every user with a home directory or a usage row (or only `users`). Files being written
    while the walk runs can show as drift that is not there a moment later; run it again to confirm.
    """
    storage = storage_for(datacenter)
    if users is None:
        names: set[str] = set()
        with suppress(FileNotFoundError):
            names = {e.name for e in storage.scandir("home") if e.kind == "dir"}
        model = get_user_model()
        by_name = model.objects.filter(username__in=names)
        with_rows = model.objects.filter(storage_usage__datacenter=datacenter)
        users = list((by_name | with_rows).distinct().order_by("username"))
    report: list[Drift] = []
    for user in users:
        name = user.get_username()
        try:
            actual_bytes, actual_files = storage.usage(f"home/{name}") if name not in (".", "..") else (0, 0)
        except (FileNotFoundError, NotADirectoryError):
            actual_bytes, actual_files = 0, 0
        live = Upload.objects.filter(owner=user, datacenter=datacenter, counts_quota=True, state__in=LIVE_STATES)
        totals = live.aggregate(size=Sum("size"), count=Count("id"))
        with ledger(user, datacenter) as book:
            row = book.row
            assert row is not None
            drift = Drift(
                username=name,
                datacenter=datacenter.name,
                recorded_bytes=row.used_bytes,
                actual_bytes=actual_bytes,
                recorded_files=row.used_files,
                actual_files=actual_files,
                recorded_reserved_bytes=row.reserved_bytes,
                actual_reserved_bytes=totals["size"] or 0,
                recorded_reserved_files=row.reserved_files,
                actual_reserved_files=totals["count"] or 0,
            )
            if fix and drift.drifted:
                StorageUsage.objects.filter(pk=row.pk).update(
                    used_bytes=actual_bytes,
                    used_files=actual_files,
                    reserved_bytes=drift.actual_reserved_bytes,
                    reserved_files=drift.actual_reserved_files,
                    recomputed_at=timezone.now(),
                )
            elif fix:
                StorageUsage.objects.filter(pk=row.pk).update(recomputed_at=timezone.now())
        report.append(drift)
    return report


def recompute_user(user: Any, datacenter: Datacenter) -> Drift:
    """Make one user's recorded usage match their home (e.g. after a job wrote its output there)."""
    return recompute(datacenter, [user], fix=True)[0]


@dataclass(frozen=True)
class Measured:
    """What a home holds on disk, found by a bounded walk (`measure_home`)."""

    bytes: int  # in regular files (links, sockets, FIFOs count 0, as quota counts them)
    files: int  # entries of every kind
    complete: bool  # False: the walk stopped at its bounds, so both are lower bounds
    preallocated: int = 0  # held on disk past files' ends (entries.Entry); not in the recorded usage
    held_open: int = 0  # in files deleted while a job keeps them open (the caller adds it); not recorded either
    layers: int = 0  # in the user's requirement layers, outside the home (the caller adds it); not recorded


def measure_home(user: Any, datacenter: Datacenter, max_entries: int, seconds: float) -> Measured:
    """The user's home as it is on disk now: a walk that never follows a link (storage/measure.py), stopped
    after `max_entries` entries or `seconds`. Raises backends.StorageUnavailable when the storage is not mounted."""
    storage = storage_for(datacenter)
    try:
        tally = storage.measure(paths.home_of(user.get_username()), max_entries, seconds)
    except (FileNotFoundError, NotADirectoryError):
        return Measured(0, 0, complete=True)  # no home yet
    return Measured(tally.bytes, tally.files, complete=tally.complete, preallocated=tally.preallocated)


def record_measurement(user: Any, datacenter: Datacenter, measured: Measured) -> StorageUsage:
    """Note when the home was measured; a complete measurement also becomes the recorded usage
    (later uploads are checked against what jobs wrote). Returns the row (its reservations)."""
    with ledger(user, datacenter) as book:
        row = book.row
        assert row is not None
        values: dict[str, Any] = {"recomputed_at": timezone.now()}
        if measured.complete:
            values.update(used_bytes=measured.bytes, used_files=measured.files)
        StorageUsage.objects.filter(pk=row.pk).update(**values)
        row.refresh_from_db()
    return row
