"""Raw descriptor I/O for uploads: a request body streamed to a file at an offset, and files hashed by streaming.

Nothing here holds a whole chunk or file in memory: bodies move in 1 MiB pieces, hashes read 4 MiB at a time.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from storage.checksums import new_hasher

PIECE = 1024 * 1024  # bytes read from the request and written per pwrite
HASH_PIECE = 4 * 1024 * 1024  # bytes per read when hashing a file
VERIFY_BEAT = timedelta(seconds=10)  # a verifier refreshes updated_at this often while it hashes


class Readable(Protocol):
    """A request body: read(n) gives at most n bytes, b"" at its end; it may also offer readinto()."""

    def read(self, size: int = ..., /) -> bytes: ...


def write_at(fd: int, offset: int, body: Readable, length: int) -> tuple[str, int]:
    """Stream `length` bytes of body to fd at offset in 1 MiB pieces; returns (xxh3_128 hex, bytes written)."""
    hasher = new_hasher()
    readinto = getattr(body, "readinto", None)
    buffer = memoryview(bytearray(PIECE)) if readinto is not None else None
    done = 0
    while done < length:
        want = min(PIECE, length - done)
        try:
            if readinto is not None and buffer is not None:
                got = readinto(buffer[:want])
                piece: memoryview | bytes = buffer[:got]
            else:
                piece = body.read(want)
                got = len(piece)
        except OSError:  # the client's connection broke or timed out: the chunk is short
            break
        if not got:
            break
        hasher.update(piece)
        view = memoryview(piece)
        while view:
            wrote = os.pwrite(fd, view, offset + done)
            view = view[wrote:]
            done += wrote
    return hasher.hexdigest(), done


def hash_fd(fd: int, size: int, beat: Callable[[], None] | None = None) -> str:
    """XXH3-128 of the first `size` bytes of fd, read in 4 MiB pieces into one buffer; beat() every 10 s."""
    hasher = new_hasher()
    last_beat = time.monotonic()
    buffer = bytearray(HASH_PIECE)
    view = memoryview(buffer)
    offset = 0
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    while offset < size:
        got = os.preadv(fd, [view[: min(HASH_PIECE, size - offset)]], offset)
        if got <= 0:
            break
        hasher.update(view[:got])
        offset += got
        if beat is not None and time.monotonic() - last_beat > VERIFY_BEAT.total_seconds():
            beat()
            last_beat = time.monotonic()
    return str(hasher.hexdigest())


def hash_range(fd: int, offset: int, length: int) -> str | None:
    """XXH3-128 of `length` bytes of fd at `offset`; None when the file ends before them."""
    hasher = new_hasher()
    remaining = length
    while remaining > 0:
        piece = os.pread(fd, min(HASH_PIECE, remaining), offset)
        if not piece:
            return None
        hasher.update(piece)
        offset += len(piece)
        remaining -= len(piece)
    return str(hasher.hexdigest())
