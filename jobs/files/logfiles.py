"""Read a job's log after a cursor (a byte offset), whole lines only, so a follower never misses or repeats one.

Logs lie in the job owner's home, where the job itself writes. Each is opened from the home's
descriptor one folder at a time with O_NOFOLLOW (`open_log_fd`, the one way the API and the local
engine open them): a job that puts a symlink (or a FIFO, or a directory) at its log.txt or at a folder
on its path gets a 403 naming the rule, and never a window on another file. Reading writes nothing: the
reconciler notes a refused log on the worker's row when it releases the job (jobs.follow.records).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from typing import IO

from paddlecloud.contract import logcap, logtimes, quantity
from paddlecloud.contract.layout import LOG_NAME
from paddlecloud.contract.quantity import quote

from core.errors import Forbidden, Invalid
from datacenters.models import Datacenter
from jobs.errors import LogRefused
from jobs.files import errorline
from jobs.files.layout import worker_parts
from jobs.models import Job
from storage import backends, paths
from storage.backends import storage_for
from storage.beneath import NotRegularFile
from storage.errors import raise_os_error

MAX_CHUNK = 256 * 1024
_MAX_CURSOR_DIGITS = 18  # an offset into any file that fits on a disk

log = logging.getLogger(__name__)


@dataclass
class LogChunk:
    text: str
    cursor: str  # pass back to get what comes after; unchanged when nothing new arrived
    complete: bool  # True when this log will never grow again
    # When each line that starts in `text` arrived (unix seconds; see paddlecloud.logtimes), None
    # where unknown; the whole list is None where the engine keeps no times for this log.
    times: list[float | None] | None = None


@dataclass(frozen=True)
class Archived:
    """What write_archive did: `written`, or kept the copy there; `refused` says why it may not write there."""

    written: bool
    refused: str = ""  # the worker's message (see refused_message), "" unless the path was unsafe


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


def log_limit(datacenter: Datacenter) -> int:
    """The datacenter's job log limit in bytes: both engines pass it as PADDLECLOUD_LOG_LIMIT (logcap)."""
    # Never below what the launcher keeps anyway: a 0 would be a bad PADDLECLOUD_LOG_LIMIT for every job.
    return max(int(quantity.parse(datacenter.job_log_limit, quantity.STORAGE, "job_log_limit")), logcap.MIN_LIMIT)


def refused_message(why: str) -> str:
    """What a worker's row says of a log the portal refuses (the reconciler writes it: jobs.follow.records)."""
    return f"log refused: {why}; the portal does not show it"


def _refuse(job: Job, worker: str, why: str) -> str:
    """The refusal's message for the worker's row, logged for the operators."""
    message = refused_message(why)
    log.warning("job %s %s: %s", job.uid, worker, message)
    return message


class _Unsafe(Exception):
    """The file's path or the file itself may not be read (a link, not a regular file)."""


def open_log_fd(job: Job, worker: str, flags: int, file_name: str = LOG_NAME) -> int:
    """A worker's log file opened beneath its owner's home with no link followed at any step (see storage.beneath).

    The home's descriptor is the start and each folder is opened from the one before with O_NOFOLLOW:
    a link a job planted at the file or at any folder on the way (even one pointing inside the home),
    or swapped in while this runs, is ELOOP; a FIFO, socket or device is NotRegularFile and is never
    opened; a missing storage mount is FileNotFoundError. Nothing is checked first and opened after.
    """
    try:
        home = paths.home_of(job.owner.get_username())
        return storage_for(job.datacenter).open_file(home, worker_parts(job, worker, file_name), flags)
    except backends.StorageUnavailable as exc:
        raise FileNotFoundError(errno.ENOENT, "the datacenter's storage is not mounted", str(exc)) from None


def log_tail(job: Job, worker: str) -> str:
    """The end of a worker's log.txt (errorline.TAIL_BYTES), opened as open_log_fd opens it; "" if it cannot be read."""
    try:
        with os.fdopen(open_log_fd(job, worker, os.O_RDONLY), "rb") as log:
            log.seek(max(0, os.fstat(log.fileno()).st_size - errorline.TAIL_BYTES))
            return log.read(errorline.TAIL_BYTES).decode("utf-8", "replace")
    except OSError:  # missing, a link, not a regular file, storage not mounted: no reason to quote
        return ""


def _open_beneath(job: Job, worker: str, file_name: str) -> IO[bytes] | None:
    logical = "/".join([paths.home_logical(job.owner, job.datacenter), *worker_parts(job, worker, file_name)])
    try:
        fd = open_log_fd(job, worker, os.O_RDONLY, file_name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise _Unsafe(f"{logical} is a directory, not a regular file") from None
    except NotRegularFile as exc:
        raise _Unsafe(f"{logical} is {exc.what}, not a regular file") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link (EMLINK on the BSDs)
            raise _Unsafe(f"{logical}: {exc.filename} is a symbolic link, which is not followed") from None
        raise_os_error(exc, logical)
    return os.fdopen(fd, "rb")


def open_log(job: Job, worker: str, file_name: str = LOG_NAME) -> IO[bytes] | None:
    """The worker's log file opened for reading; None while it does not exist; LogRefused (403) if unsafe."""
    try:
        return _open_beneath(job, worker, file_name)
    except _Unsafe as exc:
        raise LogRefused(f"{worker}: {_refuse(job, worker, str(exc))}") from None


def refusal(job: Job, worker: str) -> str:
    """Why the worker's log may not be read (its row's message, refused_message); "" if it may or is missing."""
    try:
        handle = _open_beneath(job, worker, "log.txt")
    except _Unsafe as exc:
        return refused_message(str(exc))
    except OSError:
        return ""  # storage not mounted, say: nothing to say about the log itself
    if handle is not None:
        handle.close()
    return ""


def open_times(job: Job, worker: str) -> IO[bytes] | None:
    """The worker's log.times (paddlecloud.contract.logtimes); None if missing or unsafe: then no line has a time."""
    try:
        return _open_beneath(job, worker, logtimes.TIMES_NAME)
    except _Unsafe as exc:
        log.warning("job %s %s: times not read: %s", job.uid, worker, exc)
        return None


def write_archive(job: Job, worker: str, data: bytes) -> Archived:
    """Keep `data` as the worker's log unless the file there is as long already (or holds the log limit's
    head: the launcher capped it); atomic, beneath the root, and capped at the limit as the launcher caps.

    The folders are made and the file written without following a link (a job may have swapped one
    in to steer the portal's write elsewhere); such a log is left alone and the answer says why
    (`refused`, for the worker's row). StorageUnavailable where the storage is not mounted right now.
    """
    try:
        target = paths.in_home(job.owner, job.datacenter, worker_parts(job, worker), follow_last=False)
        storage, name = target.storage, target.name
        folder = name.rsplit("/", 1)[0]
        storage.makedirs(folder)
        limit = log_limit(job.datacenter)
        if _whole_copy_there(storage, name, min(len(data), limit // 2)):
            return Archived(written=False)  # the launcher's copy is whole (the kubelet may have rotated the pod log)
        _replace_atomically(storage, folder, name, data, limit)
    except (Forbidden, NotADirectoryError) as exc:
        return Archived(written=False, refused=_refuse(job, worker, f"not archived: {exc}"))
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EMLINK):
            raise
        why = "not archived: a folder of its path is a symbolic link, which is not followed"
        return Archived(written=False, refused=_refuse(job, worker, why))
    return Archived(written=True)


def _whole_copy_there(storage: backends.PfsStorage, name: str, enough: int) -> bool:
    """A regular file of at least `enough` bytes lies at `name` (never following a link there)."""
    try:
        current = storage.lstat(name)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(current.st_mode) and current.st_size >= enough


def _replace_atomically(storage: backends.PfsStorage, folder: str, name: str, data: bytes, limit: int) -> None:
    temp = f"{folder}/.log-{secrets.token_hex(8)}.tmp"
    fd = storage.open_fd(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "r+b", buffering=0) as out:
            logcap.CappedLog(out, None, limit).write(data)
        storage.replace(temp, name)  # a link at `name` is replaced, never written through
    except BaseException:
        with contextlib.suppress(OSError):
            storage.remove(temp)
        raise
    with contextlib.suppress(FileNotFoundError):
        # Its records were offsets into the launcher's copy this replaced: wrong for the new text.
        storage.remove(f"{folder}/{logtimes.TIMES_NAME}")


def read_log_file(
    job: Job, worker: str, cursor: str, final: bool, limit: int = MAX_CHUNK, file_name: str = LOG_NAME
) -> LogChunk | None:
    """The worker's log file (or another file of its folder) after `cursor`; None while it does not exist.

    The log (not another file) comes with its lines' times, read from the log.times beside it.
    """
    offset = parse_cursor(cursor)
    handle = open_log(job, worker, file_name)
    if handle is None:
        return None
    times = open_times(job, worker) if file_name == LOG_NAME else None
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
