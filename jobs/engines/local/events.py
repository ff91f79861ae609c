"""Local jobs' process events: a job process's end reaches the control worker at once, not at the next poll.

A named pipe under VAR_DIR (mode 0600, the workers' user) carries one line per event, the job's id.
Each job process's supervisor (processes.py) writes it the moment the process's exit status is on
disk, and the local engine writes it once a job is recorded started; the control worker
(`portal/celery.py`) reads the pipe and reconciles those jobs' datacenters at once. Jobs never see
VAR_DIR (their sandbox does not hold it). The periodic reconcile stays the safety net: an event
nobody hears (no control worker, a full pipe) only waits for the next cycle.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

MAX_READ = 64 * 1024  # one read drains up to this much; the rest waits for the next
MAX_ID_DIGITS = 19  # a job id is a bigint: longer lines are not ours


def pipe_path() -> Path:
    """VAR_DIR/local-engine/events; the tests give each run its own (PADDLECLOUD_EVENTS_PIPE), since a pipe's line
    goes to one reader, and each run's control worker knows only its own database's jobs."""
    return Path(getattr(settings, "PADDLECLOUD_EVENTS_PIPE", "") or Path(settings.VAR_DIR) / "local-engine" / "events")


def line(job_id: int) -> str:
    return f"{int(job_id)}\n"


def announce(job_id: int) -> None:
    """Say that `job_id` changed; never blocks, never raises (nobody listening is fine)."""
    with contextlib.suppress(OSError):
        fd = os.open(pipe_path(), os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, line(job_id).encode())
        finally:
            os.close(fd)


def parse(data: bytes) -> set[int]:
    """The job ids in what was read; anything else is dropped."""
    ids = set()
    for word in data.split(b"\n"):
        if word.isdigit() and len(word) <= MAX_ID_DIGITS:
            ids.add(int(word))
    return ids


def open_pipe() -> int:
    """Make the pipe if needed (a non-pipe at its path is replaced) and open it for reading.

    Opened read-write, so the reader never sees end-of-file when the last writer closes."""
    path = pipe_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISFIFO(path.lstat().st_mode):
            path.unlink()
    with contextlib.suppress(FileExistsError):
        os.mkfifo(path, 0o600)
    return os.open(path, os.O_RDWR | os.O_NONBLOCK)


def listen(on_jobs: Callable[[set[int]], None], stop: threading.Event, tick: float = 1.0) -> None:
    """Call `on_jobs` with the ids heard, batched: events that arrive while it runs come in the next call."""
    fd = open_pipe()
    try:
        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], tick)
            if not ready:
                continue
            try:
                data = os.read(fd, MAX_READ)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EINTR):
                    continue
                raise
            ids = parse(data)
            if ids:
                on_jobs(ids)
    finally:
        os.close(fd)
