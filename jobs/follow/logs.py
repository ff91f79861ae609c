"""One reader of a job's logs, for the API, the pages, the download and the metrics: by cursor, by tail, or whole.

A worker's log is read the engine's way (`Engine.read_log`): from the PFS first, where the launcher
writes it (or the engine archived it), and from the engine while it has none there (a pod's own log).
Files a worker writes beside its log (metrics.jsonl) and the whole log for a download are read from
the PFS only, beneath the owner's home with no link followed (jobs.files.logfiles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from paddlecloud.contract.layout import LOG_NAME

from jobs.engines import engine_for
from jobs.files import logfiles
from jobs.files.logfiles import LogChunk
from jobs.models import Job

Times = list[float | None]


@dataclass(frozen=True)
class LogText:
    """Text after a cursor, the time of each line starting in it, the next cursor, and whether it is all."""

    text: str
    times: Times
    cursor: str
    complete: bool


def _times_of(chunk: LogChunk) -> Times:
    """One time per line starting in the chunk's text (null each where the engine kept none)."""
    return chunk.times if chunk.times is not None else [None] * logfiles.line_count(chunk.text)


def read(job: Job, worker: str, cursor: str) -> LogText:
    """The worker's log after `cursor` (at most logfiles.MAX_CHUNK bytes, whole lines until the log is final)."""
    chunk = engine_for(job.datacenter).read_log(job, worker, cursor)
    return LogText(chunk.text, _times_of(chunk), chunk.cursor, chunk.complete)


def _joined(text: str, times: Times, chunk: LogChunk) -> tuple[str, Times]:
    """`text` followed by the chunk's; a line the chunk only continues keeps the time of its start."""
    more = _times_of(chunk)
    if text and not text.endswith("\n"):
        more = more[1:]
    return text + chunk.text, times + more


def _last_lines(text: str, times: Times, count: int) -> tuple[str, Times]:
    """The last `count` lines (a line ends at a newline; a `\r` progress update stays in its line)."""
    if not count:
        return "", []
    lines = text.split("\n")
    whole = len(lines) - 1 if lines[-1] == "" else len(lines)
    first = max(0, whole - count)
    return "\n".join(lines[first:]), times[len(times) - (whole - first) :] if whole > first else []


TAIL_BLOCK = 1 << 16  # bytes read at a time from the end while looking for where the tail begins
TAIL_SCAN = 64 << 20  # the most read back: a tail of lines longer than this together starts within a line


def _tail_start(job: Job, worker: str, cursor: str, count: int) -> str:
    """Where reading must start to see the last `count` lines: just after the (count + 1)-th newline from the end
    of the log file (at most TAIL_SCAN bytes back), never before `cursor`; `cursor` where there is no file yet
    (a pod's own log, read through). The engines' cursors are the file's byte offsets (Engine.read_log)."""
    after = logfiles.parse_cursor(cursor)
    log = open_file(job, worker)
    if log is None:
        return cursor
    with log:
        position = end = log.seek(0, 2)
        newlines = 0
        while position > after and end - position < TAIL_SCAN:
            size = min(TAIL_BLOCK, position - after)
            log.seek(position - size)
            block = log.read(size)
            position -= size
            found = block.count(b"\n")
            if newlines + found <= count:
                newlines += found
                continue
            at = len(block)
            for _ in range(count + 1 - newlines):  # the rest of the count + 1 newlines, from the block's end back
                at = block.rfind(b"\n", 0, at)
            return str(position + at + 1)
        return str(max(position, after))


def read_tail(job: Job, worker: str, cursor: str, count: int) -> LogText:
    """The last `count` lines after `cursor`, read to the end so the cursor returned follows from there. It starts
    where those lines begin (`_tail_start`): a request reads about the tail, not the whole log before it."""
    engine = engine_for(job.datacenter)
    text: str = ""
    times: Times = []
    chunk = engine.read_log(job, worker, _tail_start(job, worker, cursor, count))
    while True:
        text, times = _last_lines(*_joined(text, times, chunk), count)
        following = engine.read_log(job, worker, chunk.cursor)
        if following.cursor == chunk.cursor:
            break
        chunk = following
    return LogText(text, times, chunk.cursor, chunk.complete)


def open_file(job: Job, worker: str, file_name: str = LOG_NAME) -> IO[bytes] | None:
    """A worker's log (or metrics.jsonl) on the PFS, opened to be read whole; None while it does not exist.

    LogRefused (a 403 naming why) where a link or a non-regular file lies on its path."""
    return logfiles.open_log(job, worker, file_name)
