"""A user's downloads at once, bounded across every web process of a host: each one holds a locked slot file.

A download (a file through the storage API, a worker's whole log) may last as long as its client reads
slowly, and under the portal's gevent workers it costs little to hold, but each holds an open file and a
connection slot of a worker; without a bound one user could hold them all. A slot is the file
<lock dir>/streams/<user id>-<joined>/<n> (core/locks.py's folder), taken with a non-blocking flock and given back
when the response is closed (gunicorn closes every response: sent whole or the client gone), or by the
kernel if the process dies.
PADDLECLOUD_DOWNLOADS_PER_USER slots per user per host (each web pod on Kubernetes counts its own).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.http import HttpResponseBase

from core import locks

RETRY_AFTER_SECONDS = 5


def refusal() -> str:
    limit = settings.PADDLECLOUD_DOWNLOADS_PER_USER
    return f"at most {limit} downloads at once per user; let one finish (or close it) and try again."


def hold(response: HttpResponseBase, user: Any) -> bool:
    """Tie one of the user's slots to `response` until it is closed; False (nothing held) when all are taken."""
    # By id and join time: an id used again (a database rolled back, as each test's is) is another folder.
    joined = int(user.date_joined.timestamp() * 1_000_000)
    folder = locks.lock_dir() / "streams" / f"{int(user.pk)}-{joined}"
    folder.mkdir(parents=True, exist_ok=True)
    for slot in range(settings.PADDLECLOUD_DOWNLOADS_PER_USER):
        descriptor = os.open(folder / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        # Django calls these when the server closes the response (HttpResponseBase.close, as it closes a
        # FileResponse's file); the list has no public name, nor a stub. A file object, not a bare
        # descriptor: a response dropped unclosed (a test client's) lets go of the slot when collected.
        slot_file = os.fdopen(descriptor, "rb")
        closers: list[Callable[[], None]] = cast(Any, response)._resource_closers
        closers.append(slot_file.close)
        return True
    return False
