"""What an upload holds against its owner's quota: reserved at start, charged when it lands, released otherwise.

An open upload reserves its declared size and one file, so two uploads cannot both pass a check only
one of them fits. When it lands the reservation becomes usage, less the file it replaced; when it
ends any other way (abort, expiry, failure) the reservation is released. Each step runs inside
`usage.ledger()`, the transaction that holds the user's usage row locked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from storage import usage
from storage.models import Upload


@contextmanager
def ledger_of(upload: Upload) -> Iterator[usage.Ledger]:
    """The owner's locked usage in the upload's datacenter (checks and records nothing for public)."""
    with usage.ledger(upload.owner, upload.datacenter, counts=upload.counts_quota) as book:
        yield book


def check_reservation(book: usage.Ledger, size: int, new_dirs: int) -> None:
    """413 unless the declared size, the new file and the directories to create fit: before any byte lands."""
    book.check(add_bytes=size, add_files=1 + new_dirs)


def reserve(book: usage.Ledger, size: int, created_dirs: int) -> None:
    """Record an upload that started: its directories as used, its size and file as reserved."""
    book.apply(used_files=created_dirs, reserved_bytes=size, reserved_files=1)


def check_landing(book: usage.Ledger, upload: Upload, replaced: os.stat_result | None) -> None:
    """413 if the file, less the one it replaces, no longer fits (an operator lowered the quota meanwhile).

    Its own reservation is freed in the same step, so a file that does not grow usage is never refused.
    """
    old_bytes = replaced.st_size if replaced is not None else 0
    book.check(
        add_bytes=upload.size - old_bytes,
        add_files=0 if replaced is not None else 1,
        release_bytes=upload.size,
        release_files=1,
    )


def charge(book: usage.Ledger, upload: Upload, replaced: os.stat_result | None) -> None:
    """The upload landed: its reservation becomes usage, less the file it replaced."""
    old_bytes = replaced.st_size if replaced is not None else 0
    book.apply(
        used_bytes=upload.size - old_bytes,
        used_files=0 if replaced is not None else 1,
        reserved_bytes=-upload.size,
        reserved_files=-1,
    )


def release(book: usage.Ledger, upload: Upload) -> None:
    """The upload ended without landing: its reservation goes."""
    book.apply(reserved_bytes=-upload.size, reserved_files=-1)
