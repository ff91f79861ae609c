"""Try-locks that make a periodic loop or a job's start run one at a time across worker processes.

PostgreSQL: a session advisory lock (any host). SQLite: flock on a file beside the database (SQLite
means one host anyway). Locks are not held inside a transaction, so what a loop records as it goes
(a spawned process, a created object) is committed at once and never rolled back with a later error.
"""

from __future__ import annotations

import fcntl
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection


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
    directory = Path(settings.VAR_DIR) / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{name}.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
