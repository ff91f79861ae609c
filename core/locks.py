"""Try-locks that make a periodic loop or a job's start run one at a time across worker processes.

PostgreSQL: a session advisory lock (any host). SQLite: flock on a file beside the database (SQLite
means one host anyway), removed when the lock is let go. Locks are not held inside a transaction, so
what a loop records as it goes (a spawned process, a created object) is committed at once and never
rolled back with a later error.
"""

from __future__ import annotations

import fcntl
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import connection


def job_lock(job_id: int) -> str:
    """The one lock of a job: its start and its release (after a kill) never run at once."""
    return f"job-{job_id}"


def lock_dir() -> Path:
    """Where this host's lock files live (VAR_DIR/locks; the tests give each run its own)."""
    return Path(getattr(settings, "PADDLECLOUD_LOCK_DIR", None) or Path(settings.VAR_DIR) / "locks")


@contextmanager
def exclusive(name: str) -> Iterator[bool]:
    """Yield True if this process holds the lock `name`, False if another one does."""
    if connection.vendor == "postgresql":
        key = zlib.crc32(name.encode())
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            held = bool(cursor.fetchone()[0])
        try:
            yield held
        finally:
            if held:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        return
    directory = lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.lock"
    handle = _locked(path)
    if handle is None:
        yield False
        return
    try:
        yield True
    finally:
        # Removed while still held, so lock files do not pile up (one per job ever run); whoever
        # opened this file meanwhile finds it is no longer at the path once it gets the lock (_locked).
        path.unlink(missing_ok=True)
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _locked(path: Path) -> IO[str] | None:
    """The lock file at `path`, opened and flocked by us; None if another process holds it."""
    while True:
        handle = path.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        try:
            current = path.stat()
        except FileNotFoundError:
            current = None
        mine = os.fstat(handle.fileno())
        if current is not None and (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
            return handle
        handle.close()  # its holder removed it after we opened it: lock the file now at the path
