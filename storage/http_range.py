"""The HTTP Range header of a download (one byte range, RFC 9110), and a file cut to that range."""

from __future__ import annotations

import re
from typing import Any

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


def parse_range(header: str, size: int) -> tuple[int, int] | bool | None:
    """One byte range as (start, end inclusive); None to send the whole file; False if unsatisfiable."""
    match = _RANGE.match(header)
    if match is None:
        return None  # several ranges or another unit: RFC 9110 lets us answer with the whole file
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:
        suffix = int(last)
        if suffix == 0 or size == 0:
            return False
        return max(size - suffix, 0), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        return False
    return start, min(end, size - 1)


class FileSlice:
    """A file limited to [start, start + length): read() stops at the end, fileno() lets gunicorn sendfile.

    gevent's sendfile (the portal's web workers) reads and sends: it seeks to the slice's start, then reads
    at most the slice's length, so seek() moves within the file and keeps what is left to read. To Django
    it is not seekable (seekable() is False), so FileResponse takes its length from the view, as before."""

    def __init__(self, handle: Any, start: int, length: int) -> None:
        self._handle = handle
        self._end = start + length
        self._left = length
        handle.seek(start)

    def seek(self, position: int) -> int:
        """Move to `position` in the file (not in the slice); what is left to read ends where the slice does."""
        self._left = max(0, self._end - position)
        return int(self._handle.seek(position))

    def seekable(self) -> bool:
        return False

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        size = self._left if size is None or size < 0 else min(size, self._left)
        data: bytes = self._handle.read(size)
        self._left -= len(data)
        return data

    def fileno(self) -> int:
        return int(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()
