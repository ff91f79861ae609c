"""Read a log file after a cursor (a byte offset), whole lines only, so a follower never misses or repeats one."""

from __future__ import annotations

from pathlib import Path

from rest_framework import serializers

from jobs.engines.base import LogChunk

MAX_CHUNK = 256 * 1024


def parse_cursor(cursor: str) -> int:
    if cursor in ("", None):
        return 0
    try:
        offset = int(cursor)
    except ValueError:
        raise serializers.ValidationError({"cursor": [f"{cursor!r} is not a cursor returned by this API"]}) from None
    if offset < 0:
        raise serializers.ValidationError({"cursor": ["must not be negative"]})
    return offset


def read_after(path: Path, cursor: str, final: bool, limit: int = MAX_CHUNK) -> LogChunk:
    """Text after `cursor`. Until the log is final, a trailing partial line waits for its newline."""
    offset = parse_cursor(cursor)
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(min(offset, size))
            data = handle.read(limit)
    except FileNotFoundError:
        return LogChunk(text="", cursor=str(offset), complete=final)
    if not final and len(data) < limit:
        # Hold back an unfinished line; a line longer than `limit` is passed on in pieces.
        data = data[: data.rfind(b"\n") + 1]
    end = min(offset, size) + len(data)
    return LogChunk(text=data.decode("utf-8", errors="replace"), cursor=str(end), complete=final and end >= size)
