"""Search a worker's whole log on the server: matching lines with their byte offsets, bounded per request.

The log viewer searched only the lines it had loaded (the tail of a 10 MB log). This reads the log file on the
PFS (logs.open_file: beneath the root, no link) in 1 MiB pieces and finds the text case-insensitively (ASCII
letters; the bytes as written, no pattern language: a plain `find`, so no input can make it slow), at most
MAX_MATCHES lines, MAX_BYTES read or MAX_SECONDS a request; `next` says where to go on from. Each match is the
line's start (a cursor the logs API reads from: the viewer opens there) and the line around the match.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import IO

from jobs.follow import logs
from jobs.models import Job

PIECE = 1 << 20
MAX_MATCHES = 100
MAX_BYTES = 512 << 20
MAX_SECONDS = 2.0
MAX_QUERY = 200  # characters
SHOWN = 300  # characters of a long line shown around its match
LONGEST_LINE = 4 * PIECE  # a "line" longer than this is cut into pieces of this size


@dataclass
class Found:
    matches: list[dict[str, object]] = field(default_factory=list)  # {"offset": line start, "line": text}
    next: int | None = None  # where a further request goes on from; None: the end of the log was reached
    searched: int = 0  # bytes read by this request
    size: int = 0  # the log's size when it was opened


def search(job: Job, worker: str, query: str, start: int = 0) -> Found | None:
    """The lines of the worker's log from byte `start` that hold `query`; None while there is no log file."""
    handle = logs.open_file(job, worker)
    if handle is None:
        return None
    with handle:
        handle.seek(0, 2)
        found = Found(size=handle.tell())
        handle.seek(min(start, found.size))
        _scan(handle, query.encode("utf-8", "surrogatepass").lower(), min(start, found.size), found)
    return found


def _scan(handle: IO[bytes], needle: bytes, offset: int, found: Found) -> None:
    deadline, carry, carry_at = time.monotonic() + MAX_SECONDS, b"", offset
    while True:
        piece = handle.read(PIECE)
        found.searched += len(piece)
        text = carry + piece
        # Whole lines only: the rest waits for the next piece (or the end of the file).
        end = len(text) if not piece else text.rfind(b"\n") + 1
        if piece and end == 0 and len(text) >= LONGEST_LINE:
            end = len(text)
        stopped = _matches(text[:end], needle, carry_at, found)
        if stopped is not None:
            found.next = stopped  # full: the next request goes on after the last line found
            return
        carry, carry_at = text[end:], carry_at + end
        if not piece or (not carry and carry_at >= found.size):
            return  # the end of the log as it was when opened
        if found.searched >= MAX_BYTES or time.monotonic() > deadline:
            found.next = carry_at
            return
        # Let the web worker's other connections run between pieces: under gevent (portal/gunicorn_conf.py) a
        # search would otherwise hold the whole worker for its 2 s; sleep is cooperative there.
        time.sleep(0)


def _matches(block: bytes, needle: bytes, block_at: int, found: Found) -> int | None:
    """Add the block's matching lines; where to go on from if the matches filled up before its end, else None."""
    lowered, at = block.lower(), 0
    while True:
        hit = lowered.find(needle, at)
        if hit < 0:
            return None
        if len(found.matches) >= MAX_MATCHES:
            return block_at + at
        line_start = block.rfind(b"\n", 0, hit) + 1
        line_end = block.find(b"\n", hit)
        line_end = len(block) if line_end < 0 else line_end
        line = block[line_start:line_end].decode("utf-8", "replace").replace("\r", " ")
        position = len(block[line_start:hit].decode("utf-8", "replace"))
        if len(line) > SHOWN:
            first = max(0, position - SHOWN // 3)
            line = ("…" if first else "") + line[first : first + SHOWN] + "…"
        found.matches.append({"offset": block_at + line_start, "line": line})
        at = line_end + 1  # one entry per line, however many hits it holds
