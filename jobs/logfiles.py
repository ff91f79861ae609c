"""Read a job's log after a cursor (a byte offset), whole lines only, so a follower never misses or repeats one.

Logs lie in the job owner's home, where the job itself writes. Each is opened as the files API opens
files (storage.paths, then beneath the storage root with O_NOFOLLOW): a job that puts a symlink (or a
FIFO, or a directory) at its log.txt gets a 403 naming the rule, noted in the worker's message, and
never a window on another file.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from typing import IO

from paddlecloud import logtimes
from paddlecloud.contract.quantity import quote

from jobs.engines.base import LogChunk, TransientEngineError
from jobs.errors import LogRefused
from jobs.models import Job, Worker
from portal.errors import Forbidden, Invalid
from storage import paths
from storage.errors import StorageUnavailable, raise_os_error

MAX_CHUNK = 256 * 1024
_MAX_CURSOR_DIGITS = 18  # an offset into any file that fits on a disk

log = logging.getLogger(__name__)


def parse_cursor(cursor: str | None) -> int:
    if cursor in ("", None):
        return 0
    assert cursor is not None
    text = cursor.strip()
    if text.startswith("-") and text[1:].isdigit():
        raise Invalid("must not be negative", "cursor")
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_CURSOR_DIGITS):
        raise Invalid(f"{quote(cursor)} is not a cursor returned by this API", "cursor")
    return int(text)


def log_parts(job: Job, worker: str, file_name: str = "log.txt") -> list[str]:
    """Where worker "trainer-0" of `job` writes its log (or its metrics.jsonl), below its owner's home."""
    role, _, index = worker.partition("-")
    return ["jobs", job.name, "output", job.uid, f"{role}_{index}", file_name]


def _refuse(job: Job, worker: str, why: str) -> LogRefused:
    message = f"log refused: {why}; the portal does not show it"
    role, _, index = worker.partition("-")
    # Tell the owner on the worker's row too (`paddlectl get workers`, the job page).
    Worker.objects.filter(job=job, role=role, index=int(index)).exclude(message=message).update(message=message)
    log.warning("job %s %s: %s", job.uid, worker, message)
    return LogRefused(f"{worker}: {message}")


class _Unsafe(Exception):
    """The file's path or the file itself may not be read (a link, not a regular file)."""


def _open_beneath(job: Job, worker: str, file_name: str) -> IO[bytes] | None:
    try:
        target = paths.in_home(job.owner, job.datacenter, log_parts(job, worker, file_name), follow_last=False)
    except Forbidden as exc:  # a folder on the way is a link out of the home
        raise _Unsafe(exc.message) from None
    try:
        opened = target.storage.open(target.name, "rb")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise _Unsafe(f"{target.logical} is not a regular file") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link (EMLINK on the BSDs)
            raise _Unsafe(f"{target.logical} is a symbolic link, which is not followed") from None
        raise_os_error(exc, target.logical)
    handle: IO[bytes] = opened.file  # type: ignore[assignment]
    return handle


def open_log(job: Job, worker: str, file_name: str = "log.txt") -> IO[bytes] | None:
    """The worker's log file opened for reading; None while it does not exist; LogRefused (403) if unsafe."""
    try:
        return _open_beneath(job, worker, file_name)
    except _Unsafe as exc:
        raise _refuse(job, worker, str(exc)) from None


def open_times(job: Job, worker: str) -> IO[bytes] | None:
    """The worker's log.times (see paddlecloud.logtimes); None if missing or unsafe: its lines then have no time."""
    try:
        return _open_beneath(job, worker, logtimes.TIMES_NAME)
    except _Unsafe as exc:
        log.warning("job %s %s: times not read: %s", job.uid, worker, exc)
        return None


def write_archive(job: Job, worker: str, data: bytes) -> bool:
    """Keep `data` as the worker's log unless the file there is as long already; atomic, beneath the root.

    The folders are made and the file written without following a link (a job may have swapped one
    in to steer the portal's write elsewhere); such a log is left alone and reported. True if written.
    """
    try:
        target = paths.in_home(job.owner, job.datacenter, log_parts(job, worker), follow_last=False)
        storage, name = target.storage, target.name
        folder = name.rsplit("/", 1)[0]
        storage.makedirs(folder)
        try:
            current = storage.lstat(name)
            if stat.S_ISREG(current.st_mode) and current.st_size >= len(data):
                return False  # the launcher's own copy is whole (the kubelet may have rotated the pod log)
        except FileNotFoundError:
            pass
        temp = f"{folder}/.log-{secrets.token_hex(8)}.tmp"
        fd = storage.open_fd(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            storage.replace(temp, name)  # a link at `name` is replaced, never written through
        except BaseException:
            with contextlib.suppress(OSError):
                storage.remove(temp)
            raise
        with contextlib.suppress(FileNotFoundError):
            # Its records were offsets into the launcher's copy this replaced: wrong for the new text.
            storage.remove(f"{folder}/{logtimes.TIMES_NAME}")
    except StorageUnavailable as exc:
        raise TransientEngineError(exc.message) from None  # not mounted right now: the next cycle retries
    except (Forbidden, NotADirectoryError) as exc:
        _refuse(job, worker, f"not archived: {exc}")
        return False
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EMLINK):
            raise
        _refuse(job, worker, "not archived: a folder of its path is a symbolic link, which is not followed")
        return False
    return True


def read_log_file(
    job: Job, worker: str, cursor: str, final: bool, limit: int = MAX_CHUNK, file_name: str = "log.txt"
) -> LogChunk | None:
    """The worker's log file (or another file of its folder) after `cursor`; None while it does not exist.

    The log (not another file) comes with its lines' times, read from the log.times beside it.
    """
    offset = parse_cursor(cursor)
    handle = open_log(job, worker, file_name)
    if handle is None:
        return None
    times = open_times(job, worker) if file_name == "log.txt" else None
    with handle, times or contextlib.nullcontext():
        return read_chunk(handle, offset, final, limit, times)


def read_chunk(
    handle: IO[bytes], offset: int, final: bool, limit: int = MAX_CHUNK, times: IO[bytes] | None = None
) -> LogChunk:
    """Text after byte `offset`, and the time of each line starting in it (from `times`, a log.times).

    Until the log is final, a trailing partial line waits for its newline.
    """
    size = handle.seek(0, 2)
    start = min(offset, size)
    handle.seek(start)
    data = handle.read(limit)
    if not final and len(data) < limit:
        # Hold back an unfinished line; a line longer than `limit` is passed on in pieces. Text up to
        # a `\r` is passed on: a progress bar's update shows now, and the reader replaces the line.
        data = data[: max(data.rfind(b"\n"), data.rfind(b"\r")) + 1]
    end = start + len(data)
    return LogChunk(
        text=data.decode("utf-8", errors="replace"),
        cursor=str(end),
        complete=final and end >= size,
        times=logtimes.times_at(times, logtimes.line_starts(data, start)),
    )


def line_count(text: str) -> int:
    """Lines that start in `text` (the API's rule for `times`): its start, and each newline not at its end."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)
