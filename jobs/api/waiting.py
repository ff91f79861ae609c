"""Long polling: `GET /api/v1/jobs/<name>?state=<seen>&wait=<s>` answers as soon as the job leaves `seen`.

A client that follows a job (`paddlectl wait`, `Job.wait()`, `logs -f`) learns its end within a tenth
of a second instead of at its next poll. Waiting holds a connection of a web worker (a greenlet) and reads a
row every CHECK_SECONDS, so it is bounded three ways: at
most MAX_WAIT seconds a request, at most PADDLECLOUD_LONG_POLL_SLOTS waiting requests per web process,
at most PER_USER of them per user per process. A request over a bound is answered at once (with the
job as it is), never refused: the client then simply polls.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from jobs.models import Job

MAX_WAIT = 10.0  # seconds one request may wait
PER_USER = 2  # waiting requests of one user in one web process
CHECK_SECONDS = 0.1  # how often a waiting request reads the job's state (one indexed row)

_lock = threading.Lock()
_waiting: Counter[int] = Counter()


@contextmanager
def _slot(user_id: int) -> Iterator[bool]:
    with _lock:
        held = sum(_waiting.values()) < settings.PADDLECLOUD_LONG_POLL_SLOTS and _waiting[user_id] < PER_USER
        if held:
            _waiting[user_id] += 1
    try:
        yield held
    finally:
        if held:
            with _lock:
                _waiting[user_id] -= 1


def until_state_leaves(job: Job, seen: str, wait: float, user_id: int) -> None:
    """Return once `job`'s state is no longer `seen`, after `wait` s (<= MAX_WAIT), or at once over a bound."""
    if job.state != seen or wait <= 0:
        return
    with _slot(user_id) as held:
        if not held:
            return
        deadline = time.monotonic() + min(wait, MAX_WAIT)
        rows = Job.objects.filter(pk=job.pk).values_list("state", flat=True)
        while time.monotonic() < deadline:
            time.sleep(CHECK_SECONDS)
            if rows.first() != seen:
                return
