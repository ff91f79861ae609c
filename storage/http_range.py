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
    """A file limited to [start, start + length): read() stops at the end, fileno() lets gunicorn sendfile."""

    def __init__(self, handle: Any, start: int, length: int) -> None:
        self._handle = handle
        self._left = length
        handle.seek(start)

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
