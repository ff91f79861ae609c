"""manage.py storage_usage: recompute storage usage from disk, report drift, and with --fix correct it.

Usage is kept exact by every write through the portal; files that jobs write straight onto the
filesystem (outputs, logs) are not seen until this runs (or storage.usage.recompute_user).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import QuerySet
from paddlecloud.contract.units import human_bytes

from datacenters.models import Datacenter
from storage.backends import StorageUnavailable
from storage.usage import Drift, recompute


def _describe(drift: Drift) -> str:
    parts = []
    if drift.recorded_bytes != drift.actual_bytes:
        parts.append(f"bytes {human_bytes(drift.recorded_bytes)} -> {human_bytes(drift.actual_bytes)}")
    if drift.recorded_files != drift.actual_files:
        parts.append(f"files {drift.recorded_files} -> {drift.actual_files}")
    if drift.recorded_reserved_bytes != drift.actual_reserved_bytes:
        recorded, actual = human_bytes(drift.recorded_reserved_bytes), human_bytes(drift.actual_reserved_bytes)
        parts.append(f"reserved {recorded} -> {actual}")
    if drift.recorded_reserved_files != drift.actual_reserved_files:
        parts.append(f"reserved files {drift.recorded_reserved_files} -> {drift.actual_reserved_files}")
    return ", ".join(parts) or f"ok ({human_bytes(drift.actual_bytes)}, {drift.actual_files} files)"


def _datacenters(names: list[str] | None) -> QuerySet[Datacenter]:
    """The datacenters named (all without names); CommandError for a name that is none."""
    datacenters = Datacenter.objects.all()
    if names:
        datacenters = datacenters.filter(name__in=names)
        unknown = set(names) - set(datacenters.values_list("name", flat=True))
        if unknown:
            raise CommandError(f"unknown datacenter(s): {', '.join(sorted(unknown))}")
    return datacenters


def _users(names: list[str] | None) -> list[Any] | None:
    """The users named (None without names: every user); CommandError for a name that is none."""
    if not names:
        return None
    users = list(get_user_model().objects.filter(username__in=names))
    unknown = set(names) - {u.get_username() for u in users}
    if unknown:
        raise CommandError(f"unknown user(s): {', '.join(sorted(unknown))}")
    return users


class Command(BaseCommand):
    help = "Recompute per-user storage usage from disk and report drift; --fix stores the recomputed values."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--datacenter", action="append", metavar="NAME", help="only this datacenter (repeatable)")
        parser.add_argument("--user", action="append", metavar="NAME", help="only this user (repeatable)")
        parser.add_argument("--fix", action="store_true", help="store the recomputed usage")

    def handle(self, *args: Any, **options: Any) -> None:
        datacenters = _datacenters(options["datacenter"])
        users = _users(options["user"])
        drifted = checked = 0
        for datacenter in datacenters:
            try:
                report = recompute(datacenter, users, fix=options["fix"])
            except StorageUnavailable:
                self.stderr.write(f"{datacenter.name}: storage root {datacenter.storage_root} is not mounted; skipped")
                continue
            for drift in report:
                checked += 1
                if drift.drifted:
                    drifted += 1
                if drift.drifted or options["verbosity"] >= 2:
                    self.stdout.write(f"{datacenter.name} {drift.username}: {_describe(drift)}")
        summary = f"{checked} user(s) checked, {drifted} with drift"
        if drifted and not options["fix"]:
            raise CommandError(f"{summary}; run with --fix to store the recomputed usage")
        self.stdout.write(summary + ("; fixed" if drifted else ""))
